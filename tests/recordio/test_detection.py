"""The detection label layout: what MXNet's detection iterator accepts,
written and read back by the one module that knows it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from im2rec.recordio.detection import (
    MAX_CLASS,
    MAX_LENGTH,
    kept,
    make_label,
    outside,
    problem,
    read_label,
)

unit = st.floats(0, 1, width=32)
classes = st.integers(0, MAX_CLASS - 1).map(float)
objects = st.integers(1, 8).flatmap(
    lambda width: st.lists(
        st.tuples(classes, st.lists(unit, min_size=width + 4, max_size=width + 4)).map(
            lambda row: [row[0], *row[1]]
        ),
        max_size=20,
    )
)


@given(objects, st.lists(st.floats(-1e6, 1e6, width=32), max_size=4))
def test_a_label_made_reads_back_as_its_objects(
    rows: list[list[float]], extra: list[float]
) -> None:
    width = len(rows[0]) if rows else 5
    label = make_label(np.asarray(rows, np.float32).reshape(-1, width), extra)
    assert label.dtype == np.float32 and label[:2].tolist() == [2 + len(extra), width]
    if not rows:  # the header alone: MXNet refuses it
        assert problem(label) is not None
        return
    assert problem(label) is None
    got = read_label(label)
    assert got.header.tolist() == label[: 2 + len(extra)].tolist()
    assert np.array_equal(got.objects, np.asarray(rows, np.float32))


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ([2, 5, 0, 0.1, 0.1, 0.2], "6 label values"),
        ([1, 5, 0, 0.1, 0.1, 0.2, 0.2], "header width A = 1"),
        ([2, 4, 0, 0.1, 0.1, 0.2, 0.2], "object width B = 4"),
        ([2, 5, 0, 0.1, 0.1, 0.2, 0.2, 1], "not a whole number of 5-value objects"),
        ([9, 5, 0, 0.1, 0.1, 0.2, 0.2], "only 7 values"),
        ([float("nan"), 5, 0, 0.1, 0.1, 0.2, 0.2], "header width A = nan"),
        ([2, 1e9, 0, 0.1, 0.1, 0.2, 0.2], "object width B = 1e+09"),
        ([2, 5, float("nan"), 0.1, 0.1, 0.2, 0.2], "label value 2 is nan"),
        ([4, 5, float("inf"), 9, 0, 0.1, 0.1, 0.2, 0.2], "label value 2 is inf"),
        ([2, 5, 1, 0.1, 0.1, 0.2, float("-inf")], "label value 6 is -inf"),
        ([2, 5, 0.5, 0.1, 0.1, 0.2, 0.2], "class 0.5 is not a class number"),
        ([2, 5, -3, 0.1, 0.1, 0.2, 0.2], "class -3 is not a class number"),
        ([2, 5, 2.0**24, 0.1, 0.1, 0.2, 0.2], "class 1.67772e+07 is not"),
        ([2, 5, -1, 0.1, 0.1, 0.2, 0.2], "class -1 is not"),  # (padding only on an empty box)
        ([2, 5, 0, 0.1, 0.1, 0.2, 0.2, 1, 0.1, 0.1, 1e30, 0.2], "object 1's corners"),
        ([2, 5, 0, -5, 0.1, 0.2, 0.2], "not normalised"),
        ([2, 5, *[0.0] * (MAX_LENGTH - 1)], f"{MAX_LENGTH + 1:,} label values; a detection"),
    ],
)
def test_what_mxnet_refuses_is_named(values: list[float], words: str) -> None:
    why = problem(values)
    assert why is not None and words in why
    with pytest.raises(ValueError, match="."):
        read_label(values)


def test_padding_rows_may_say_class_minus_one() -> None:
    """(MXNet's label_pad_value and GluonCV's dummy label: an empty box of
    class -1, which every reader drops.)"""
    label = [2, 5, 0, 0.1, 0.1, 0.2, 0.2, -1, -1, -1, -1, -1]
    assert problem(label) is None
    assert kept(read_label(label).objects).tolist() == [True, False]


def test_widths_are_read_as_mxnet_casts_them() -> None:
    """(static_cast<int>: 2.9 is 2, as MXNet reads it.)"""
    got = read_label([2.9, 5.5, 0, 0.1, 0.1, 0.2, 0.2])
    assert (got.header_width, got.object_width) == (2, 5)


def test_empty_boxes_are_dropped_and_out_of_range_ones_found() -> None:
    rows = np.asarray(
        [[0, 0.1, 0.1, 0.5, 0.5], [1, 0.5, 0.1, 0.5, 0.6], [2, 0.1, 0.6, 0.2, 0.5],
         [3, -0.1, 0, 0.5, 1.2], [4, 0.2, 0.2, float("nan"), 0.3]], np.float32,
    )  # fmt: skip
    assert kept(rows).tolist() == [True, False, False, True, False]
    assert outside(rows).tolist() == [False, False, False, True, True]


any_value = st.one_of(
    st.floats(-3, 3, width=32),
    st.integers(-2, 12).map(float),
    st.sampled_from([np.nan, np.inf, 2.0**24]),
)
any_label = st.one_of(
    objects.map(
        lambda rows: make_label(
            np.asarray(rows, np.float32).reshape(len(rows), -1)
            if rows
            else np.zeros((0, 5), np.float32)
        ).tolist()
    ),
    st.lists(any_value, max_size=30),
    st.tuples(st.integers(2, 5), st.integers(5, 7), st.lists(any_value, max_size=30)).map(
        lambda t: [float(t[0]), float(t[1]), *t[2]]
    ),
)


def _batch(labels: list[list[float]], gaps: list[int]) -> Any:
    """``labels`` one after another as a :class:`Labels`, ``gaps[i]`` NaNs
    (values of no label) before label ``i``."""
    from im2rec.recordio.detection import Labels

    values: list[float] = []
    starts = []
    for label, gap in zip(labels, gaps, strict=False):
        values += [np.nan] * gap
        starts.append(len(values))
        values += label
    return Labels(np.asarray(values, np.float32), np.asarray(starts, np.int64),
                  np.asarray([len(v) for v in labels], np.int64))  # fmt: skip


@given(st.lists(any_label, max_size=12), st.lists(st.integers(0, 3), min_size=12, max_size=12))
def test_a_batch_says_of_each_label_what_problem_says(
    labels: list[list[float]], gaps: list[int]
) -> None:
    """check() on many labels at once (with values between them that
    belong to none) names each as problem() names it alone."""
    from im2rec.recordio.detection import check, problems

    batch = _batch(labels, gaps)
    faults, groups = check(batch)
    words = problems(batch, faults, np.flatnonzero(faults.code))
    said = iter(words)
    for label, code in zip(labels, faults.code.tolist(), strict=True):
        alone = problem(np.asarray(label, np.float32))
        assert (alone is None) == (code == 0)
        if alone is not None:
            assert next(said) == alone
    for owner, rows, _, _, keep in groups:  # every good label's objects, as read_label reads them
        assert np.array_equal(keep, kept(rows))
        for i in np.flatnonzero(faults.code == 0).tolist():
            if (owner == i).any():
                assert np.array_equal(rows[owner == i], read_label(labels[i]).objects)


@given(st.lists(objects.filter(bool).map(lambda rows: [r[:5] for r in rows]), min_size=2, max_size=8),
       st.sampled_from([(), (640.0, 480.0)]))  # fmt: skip
def test_a_batch_of_one_layout_reads_each_labels_objects(
    rows: list[list[list[float]]], extra: tuple[float, ...]
) -> None:
    """Labels of one layout one after another (a block of records' labels):
    their objects are all but the headers, read as read_label reads each."""
    from im2rec.recordio.detection import Labels, check

    labels = [make_label(np.asarray(r, np.float32), extra) for r in rows]
    counts = np.asarray([len(v) for v in labels], np.int64)
    batch = Labels(np.concatenate(labels), np.cumsum(counts) - counts, counts)
    faults, groups = check(batch)
    verdicts = [problem(v) is None for v in labels]
    assert (faults.code == 0).tolist() == verdicts
    ((owner, objects, _, _, _),) = groups
    for i, label in enumerate(labels):
        assert np.array_equal(objects[owner == i], read_label(label).objects)


@given(st.lists(any_label, max_size=12), st.lists(st.integers(0, 3), min_size=12, max_size=12))
def test_headers_alone_are_found_in_a_batch_as_alone(
    labels: list[list[float]], gaps: list[int]
) -> None:
    """A label of its header alone is found the same in a batch (with
    values between labels that belong to none, NaN among them) as by
    itself, and read_label(alone=True) reads it as no objects."""
    from im2rec.recordio.detection import check, headers_alone

    many = _batch(labels, gaps)
    found = headers_alone(many, check(many)[0])
    for label, alone in zip(labels, found.tolist(), strict=True):
        one = _batch([label], [0])
        assert headers_alone(one, check(one)[0])[0] == alone
        if alone:
            parsed = read_label(label, alone=True)
            assert len(parsed.objects) == 0 and len(parsed.header) == len(label)


@pytest.mark.parametrize(
    ("label", "alone"),
    [
        (make_label(np.empty((0, 6)), (640.0, 480.0)), True),  # rec list --keep-empty's
        (make_label(np.empty((0, 5))), True),  # A = 2, B = 5: the narrowest
        ([4.0, 6.0, np.nan, 480.0], False),
        ([4.0, 4.0, 640.0, 480.0], False),  # B is no object's width
        ([5.0, 6.0, 640.0, 480.0], False),  # A says more than there is
        ([1.0, 6.0], False),
    ],
)
def test_a_header_alone_is_an_image_of_no_objects_only_when_asked(
    label: list[float], alone: bool
) -> None:
    with pytest.raises(ValueError, match="at least 7|A =|header|width|finite"):
        read_label(label)  # (MXNet's rule: fewer than 7 values)
    if alone:
        assert read_label(label, alone=True).objects.shape == (0, int(label[1]))
    else:
        with pytest.raises(ValueError):
            read_label(label, alone=True)
