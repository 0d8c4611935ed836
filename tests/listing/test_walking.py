"""Folder walk, labels, shuffle, chunks and splits (docs/format.md, "im2rec.py, Listing")."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from im2rec.errors import ConfigError, DatasetError, MissingFileError
from im2rec.listing import ListOptions, make_lists, plan_lists, scan_folder
from im2rec.listing.walking import SMALL_CLASS, UNSAFE_NAME

from ..conftest import touch
from .test_entries import R, entries


def test_extensions_are_case_insensitive_and_normalised(tree: Path) -> None:
    scan = scan_folder(tree, ListOptions(recursive=True, exts=("GIF", ".PNG")))
    assert [e.path.rsplit(os.sep, 1)[-1] for e in scan.entries] == ["x.png", "img3.Png", "img4.gif"]


def test_symlinked_files_and_folders(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    touch(outside, "o1.jpg", "o2.jpg")
    (tree / "e_link").symlink_to(outside, target_is_directory=True)
    (tree / "linked.jpg").symlink_to(tree / "top.jpg")
    (tree / "broken.jpg").symlink_to(tree / "missing.jpg")
    scan = scan_folder(tree, R)
    assert [e.path for e in scan.entries][:2] == ["linked.jpg", "top.jpg"]
    assert [e.path for e in scan.entries][-2:] == [f"e_link{os.sep}o1.jpg", f"e_link{os.sep}o2.jpg"]
    no_follow = scan_folder(tree, ListOptions(recursive=True, follow_links=False))
    assert not any(e.path.startswith("e_link") for e in no_follow.entries)
    assert "linked.jpg" in [e.path for e in no_follow.entries]


def test_symlink_loops_are_errors(tree: Path) -> None:
    (tree / "a_dir" / "sub" / "loop").symlink_to(tree / "a_dir", target_is_directory=True)
    with pytest.raises(
        DatasetError,
        match=r"loop: symlink loop: it leads back to .*a_dir, which contains it; .*--no-follow-links",
    ):
        scan_folder(tree, R)
    assert len(scan_folder(tree, ListOptions(recursive=True, follow_links=False)).entries) == 7


def test_mutual_symlink_loop(tmp_path: Path) -> None:
    touch(tmp_path, "r/a/1.jpg", "r/b/2.jpg")
    (tmp_path / "r/a/to_b").symlink_to(tmp_path / "r/b", target_is_directory=True)
    (tmp_path / "r/b/to_a").symlink_to(tmp_path / "r/a", target_is_directory=True)
    with pytest.raises(DatasetError, match="symlink loop"):
        scan_folder(tmp_path / "r", R)


def test_unreadable_folder_is_an_error(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Running as root, permissions cannot make a folder unreadable, so the
    # operating system's refusal is simulated for one folder.
    real_scandir = os.scandir
    blocked = str(tree / "b_dir")

    def scandir(path: str) -> object:
        if os.fspath(path) == blocked:
            raise PermissionError(13, "Permission denied", blocked)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(
        DatasetError,
        match=r"b_dir: cannot read this folder \(Permission denied\); fix its permissions",
    ):
        scan_folder(tree, R)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder")
def test_unreadable_folder_for_real(tree: Path) -> None:
    (tree / "b_dir").chmod(0)
    try:
        with pytest.raises(DatasetError, match="cannot read this folder"):
            scan_folder(tree, R)
    finally:
        (tree / "b_dir").chmod(0o755)


def test_no_images(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(
        DatasetError, match=r"c_empty: no images found \(extensions .jpeg .jpg .png\)$"
    ):
        scan_folder(tree / "c_empty", ListOptions())
    with pytest.raises(
        DatasetError,
        match="no images found .*; images in subfolders are listed only with --recursive",
    ):
        touch(tmp_path, "only_sub/inner/x.jpg")
        scan_folder(tmp_path / "only_sub", ListOptions())
    with pytest.raises(MissingFileError, match="nope: no such folder"):
        scan_folder(tmp_path / "nope", R)
    with pytest.raises(DatasetError, match="is a file, not a folder"):
        scan_folder(tree / "top.jpg", R)


def test_min_per_class_drops_and_renumbers(tree: Path) -> None:
    scan = scan_folder(tree, ListOptions(recursive=True, min_per_class=2))
    assert scan.classes == ["b_dir"]
    assert [(e.key, e.label) for e in scan.entries] == [(0, 0), (1, 0), (2, 0)]
    assert len(scan.skipped[SMALL_CLASS]) == 4
    with pytest.raises(
        DatasetError, match=r"no images left to list \(7 class below --min-per-class\)"
    ):
        scan_folder(tree, ListOptions(recursive=True, min_per_class=9))


def test_shuffle_matches_im2rec_seed_100() -> None:
    planned = plan_lists(entries(8), ListOptions())
    assert [e.key for e in planned[0][1]] == [0, 4, 7, 5, 1, 6, 3, 2]
    items = entries(1000)
    random.seed(100)
    random.shuffle(items)
    assert plan_lists(entries(1000), ListOptions())[0][1] == items
    assert plan_lists(entries(8), ListOptions(shuffle=False))[0][1] == entries(8)


def test_chunks_and_splits_like_im2rec() -> None:
    planned = plan_lists(entries(8), ListOptions(chunks=3, train_ratio=0.6))
    assert [(name, len(e)) for name, e in planned] == [
        ("_0_val", 2), ("_0_train", 1), ("_1_val", 2), ("_1_train", 1), ("_2_val", 1), ("_2_train", 1),
    ]  # fmt: skip
    planned = plan_lists(entries(10), ListOptions(train_ratio=0.6, test_ratio=0.2, shuffle=False))
    assert [(n, [x.key for x in e]) for n, e in planned] == [
        ("_test", [0, 1]), ("_val", [8, 9]), ("_train", [2, 3, 4, 5, 6, 7]),
    ]  # fmt: skip
    # no val list when the ratios add up to 1
    assert [n for n, _ in plan_lists(entries(4), ListOptions(train_ratio=0.5, test_ratio=0.5))] == [
        "_test",
        "_train",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunks": 0}, "--chunks must be at least 1, got 0"),
        ({"train_ratio": 1.5}, "--train-ratio must be between 0 and 1, got 1.5"),
        ({"test_ratio": -0.1}, "--test-ratio must be between 0 and 1, got -0.1"),
        (
            {"train_ratio": 0.8, "test_ratio": 0.3},
            "--train-ratio 0.8 plus --test-ratio 0.3 is more than 1",
        ),
        # im2rec.py silently ignored --test-ratio when --train-ratio was 1
        ({"test_ratio": 0.5}, "--train-ratio 1 plus --test-ratio 0.5 is more than 1"),
        ({"exts": ()}, "--exts needs at least one extension"),
        ({"min_per_class": -1}, "--min-per-class must be 0 or more"),
    ],
)
def test_bad_options(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ListOptions(**kwargs)  # type: ignore[arg-type]


def test_make_lists_writes_everything(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "ex"
    result = make_lists(tree, out, ListOptions(recursive=True, train_ratio=0.5))
    assert [Path(p).name for p, _ in result.lists] == ["ex_val.lst", "ex_train.lst"]
    assert sum(n for _, n in result.lists) == 7
    assert (tmp_path / "out" / "ex.classes.tsv").read_text().splitlines()[:2] == [
        "0\t.",
        "1\ta_dir",
    ]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "ex.classes.tsv", "ex.lists.json", "ex_train.lst", "ex_val.lst",
    ]  # fmt: skip


def test_skipped_files_are_reported_in_a_file(tree: Path, tmp_path: Path) -> None:
    (tree / "bad\tname.jpg").write_bytes(b"x")
    result = make_lists(tree, tmp_path / "ex", R)
    assert result.skipped_report is not None
    assert Path(result.skipped_report).read_text() == f"{UNSAFE_NAME}\tbad\\tname.jpg\n"
    assert result.to_dict()["skipped"] == {UNSAFE_NAME: 1}
