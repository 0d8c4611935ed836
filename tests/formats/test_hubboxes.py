"""Detection labels to the Hub's pixel boxes and back (:mod:`im2rec.formats.hubboxes`):
every label comes back bit for bit, the header given or made."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from im2rec.formats import hubboxes

corner = st.floats(0, 1, width=32)


@st.composite
def rows(draw: st.DrawFn) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    n = draw(st.integers(0, 6))
    extra = draw(st.integers(0, 2))
    labels, width, height = [], [], []
    for _ in range(n):
        objects = []
        for _ in range(draw(st.integers(0, 5))):
            x0, x1 = sorted(draw(st.tuples(corner, corner)))
            y0, y1 = sorted(draw(st.tuples(corner, corner)))
            more = draw(st.lists(st.floats(-5, 5, width=32), min_size=extra, max_size=extra))
            objects.append([draw(st.integers(-1, 999)), x0, y0, x1, y1, *more])
        w, h = draw(st.integers(1, 1 << 16)), draw(st.integers(1, 1 << 16))
        head = [draw(st.sampled_from([2, 4, 6])), 5 + extra]
        head += draw(st.lists(st.floats(0, 1e4, width=32), min_size=head[0] - 2,
                              max_size=head[0] - 2))  # fmt: skip
        label = np.array(head + [v for o in objects for v in o], np.float32)
        labels.append(label)
        width.append(w)
        height.append(h)
    return labels, np.array(width, np.int64), np.array(height, np.int64)


@settings(max_examples=300, deadline=None)
@given(rows())
def test_labels_come_back_bit_for_bit(
    case: tuple[list[np.ndarray], np.ndarray, np.ndarray],
) -> None:
    labels, width, height = case
    found, exact = hubboxes.objects(labels, width, height)
    heads = [label[: int(label[0])] for label in labels]
    back = hubboxes.labels(found, width, height, heads, empty_extra=0)
    for i, (label, again) in enumerate(zip(labels, back, strict=True)):
        if exact[i]:
            assert again.tobytes() == label.tobytes(), i
    # without the header: GluonCV's, with the image's size, the objects the same
    made = hubboxes.labels(found, width, height, None)
    for i, (label, again) in enumerate(zip(labels, made, strict=True)):
        a, b = int(label[0]), int(label[1])
        if exact[i] and len(label) > a:
            assert again[:4].tolist() == [4, b, width[i], height[i]]
            assert again[4:].tobytes() == label[a:].tobytes()
    # corners in order (a box, or an empty one of equal corners) always come
    # back exactly: only a reversed box far from the origin may not
    assert exact.all()
    assert np.array_equal(found.bbox[:, 0] + found.bbox[:, 2] >= found.bbox[:, 0],
                          np.ones(len(found.bbox), bool))  # fmt: skip
