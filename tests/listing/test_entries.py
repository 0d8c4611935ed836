"""The entries a listing makes: walk order and labels, non-recursive lists,
names a .lst line cannot carry skipped, every entry in exactly one list,
stratified splits keeping class proportions."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from im2rec.listing import Entry, ListOptions, plan_lists, scan_folder
from im2rec.listing.walking import UNSAFE_NAME

from ..conftest import touch

R = ListOptions(recursive=True)


def paths(entries: list[Entry]) -> list[tuple[int, int, str]]:
    return [(e.key, e.label, e.path) for e in entries]


def entries(n: int, classes: int = 1) -> list[Entry]:
    return [Entry(i, i % classes, f"{i}.jpg") for i in range(n)]


def test_recursive_walk_order_and_labels(tree: Path) -> None:
    scan = scan_folder(tree, R)
    sep = os.sep
    assert paths(scan.entries) == [
        (0, 0, "top.jpg"),
        (1, 1, "a_dir/z.jpg".replace("/", sep)),
        (2, 2, f"a_dir{sep}sub{sep}y.jpg"),
        (3, 3, f"a_dir{sep}sub{sep}deeper{sep}x.png"),
        (4, 4, f"b_dir{sep}IMG2.JPEG"),  # code-point order: upper case first
        (5, 4, f"b_dir{sep}img1.jpg"),
        (6, 4, f"b_dir{sep}img3.Png"),
    ]
    assert scan.classes == [".", "a_dir", f"a_dir{sep}sub", f"a_dir{sep}sub{sep}deeper", "b_dir"]
    assert scan.skipped == {}


def test_non_recursive_lists_only_the_root(tree: Path) -> None:
    scan = scan_folder(tree, ListOptions())
    assert paths(scan.entries) == [(0, 0, "top.jpg")] and scan.classes == ["."]


def test_names_a_lst_line_cannot_carry_are_skipped(tmp_path: Path) -> None:
    root = tmp_path / "r"
    touch(
        root, "ok.jpg", "tab\there.jpg", "new\nline.jpg", "trailing .jpg ", " lead.jpg", "cr\r.jpg"
    )
    (root / "a\tdir").mkdir()
    touch(root, "a\tdir/inside.jpg")
    with open(os.path.join(os.fsencode(root), b"\xff\xfe.jpg"), "wb") as f:
        f.write(b"x")
    scan = scan_folder(root, R)
    assert paths(scan.entries) == [(0, 0, "ok.jpg")]
    assert len(scan.skipped[UNSAFE_NAME]) == 6


def test_every_entry_lands_in_exactly_one_list() -> None:
    planned = plan_lists(entries(97), ListOptions(chunks=4, train_ratio=0.7, test_ratio=0.1))
    assert sorted(e.key for _, es in planned for e in es) == list(range(97))


def test_stratified_split_keeps_class_proportions() -> None:
    items = entries(60, 1) + [Entry(60 + i, 1, f"b{i}.jpg") for i in range(20)]
    planned = dict(plan_lists(items, ListOptions(train_ratio=0.5, test_ratio=0.25, stratify=True)))
    per = {name: Counter(e.label for e in es) for name, es in planned.items()}
    assert per == {"_test": {0: 15, 1: 5}, "_val": {0: 15, 1: 5}, "_train": {0: 30, 1: 10}}
    # a plain split of the same shuffled list does not guarantee that
    assert sorted(e.key for es in planned.values() for e in es) == list(range(80))


@given(st.integers(0, 300), st.integers(0, 2**32))
def test_positions_shuffle_as_a_list_of_the_same_length_would(n: int, seed: int) -> None:
    """(im2rec.py shuffles a list with random.seed(100): the same draws here.)"""
    import random
    from array import array

    from im2rec.listing.entries import shuffle_positions

    order = array("q", range(n))
    shuffle_positions(order, random.Random(seed))
    expected = list(range(n))
    random.Random(seed).shuffle(expected)
    assert list(order) == expected
