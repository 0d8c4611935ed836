"""``rec list`` against the real im2rec.py --list (``make compat``): the same
files, byte for byte, for the same tree and options."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.listing import ListOptions, make_lists

from ..conftest import MXNet

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree") / "example"
    files = [
        "root_a.jpg",
        "root_b.PNG",
        "notes.txt",
        "a_dir/x.jpg",
        "a_dir/Y.JPEG",
        "b_dir/sub/deep.jpg",
    ]
    files += [
        f"class_{c:02d}/img_{i:03d}.{'jpg' if i % 3 else 'JPG'}"
        for c in range(12)
        for i in range(c * 3 + 1)
    ]
    files += [
        "z_nested/one/1.png",
        "z_nested/two/2.jpg",
        "z_nested/two/3.jpg",
        "empty_class/readme.md",
    ]
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_bytes(b"x")
    (root / "empty_dir").mkdir()
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "o.jpg").write_bytes(b"x")
    (root / "linked_dir").symlink_to(outside, target_is_directory=True)
    (root / "a_dir" / "linked.jpg").symlink_to(root / "root_a.jpg")
    return root


CASES = [
    [],
    ["--recursive"],
    ["--recursive", "--no-shuffle"],
    ["--recursive", "--chunks", "3"],
    ["--recursive", "--train-ratio", "0.6"],
    ["--recursive", "--train-ratio", "0.7", "--test-ratio", "0.2"],
    ["--recursive", "--chunks", "4", "--train-ratio", "0.5", "--test-ratio", "0.5"],
    ["--recursive", "--chunks", "2", "--train-ratio", "0.8", "--test-ratio", "0.1", "--no-shuffle"],
    ["--recursive", "--exts", ".png"],
]


def to_options(args: list[str]) -> ListOptions:
    kw: dict[str, object] = {
        "recursive": "--recursive" in args,
        "shuffle": "--no-shuffle" not in args,
    }
    for flag, key, kind in (("--chunks", "chunks", int), ("--train-ratio", "train_ratio", float),
                            ("--test-ratio", "test_ratio", float), ("--exts", "exts", str)):  # fmt: skip
        if flag in args:
            value = kind(args[args.index(flag) + 1])
            kw[key] = (value,) if key == "exts" else value
    return ListOptions(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c) or "defaults" for c in CASES])
def test_same_lists_as_im2rec(tree: Path, tmp_path: Path, mxnet: MXNet, args: list[str]) -> None:
    (tmp_path / "mx").mkdir()
    (tmp_path / "ours").mkdir()
    mxnet.im2rec(str(tmp_path / "mx" / "data"), str(tree), "--list", *args)
    make_lists(tree, tmp_path / "ours" / "data", to_options(args))
    theirs = sorted(p.name for p in (tmp_path / "mx").iterdir())
    ours = sorted(p.name for p in (tmp_path / "ours").glob("*.lst"))
    assert ours == theirs and theirs
    for name in theirs:
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "mx" / name).read_bytes(), (
            name
        )


def test_class_map_matches_what_im2rec_prints(tree: Path, tmp_path: Path, mxnet: MXNet) -> None:
    printed = mxnet.im2rec(str(tmp_path / "data"), str(tree), "--list", "--recursive").stdout
    result = make_lists(tree, tmp_path / "ours", ListOptions(recursive=True))
    ours = Path(result.class_map).read_text().splitlines()
    theirs = [line.rsplit(" ", 1) for line in printed.splitlines()]
    assert [line.split("\t") for line in ours] == [[label, folder] for folder, label in theirs]
    assert len(ours) == len(theirs) > 10


def test_mxnet_reads_our_lists(tree: Path, tmp_path: Path, mxnet: MXNet) -> None:
    """im2rec.py's read_list (the pack step) parses every line we write."""
    make_lists(tree, tmp_path / "data", ListOptions(recursive=True))
    result = mxnet.run(
        """
        import importlib.util
        spec = importlib.util.spec_from_file_location("im2rec", im2rec_py)
        module = importlib.util.module_from_spec(spec)
        import sys
        sys.argv = ["im2rec.py", "x", "y"]
        spec.loader.exec_module(module)
        result = [[item[0], item[1], item[2:]] for item in module.read_list(lst)]
        """,
        im2rec_py=mxnet.im2rec_py,
        lst=str(tmp_path / "data.lst"),
    )
    lines = (tmp_path / "data.lst").read_text().splitlines()
    assert len(result) == len(lines)
    for (index, path, labels), line in zip(result, lines, strict=True):
        i, label, p = line.split("\t")
        assert (index, path, labels) == (int(i), p, [float(label)])


def test_image_record_iter_reads_labels_from_our_lst(tmp_path: Path, mxnet: MXNet) -> None:
    """ImageRecordIter's own .lst parser (path_imglist) takes our labels."""
    import numpy as np

    from im2rec import recordio

    root = tmp_path / "imgs"
    for c in range(3):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(2):
            (root / f"class{c}" / f"{i}.png").write_bytes(b"x")
    make_lists(root, tmp_path / "data", ListOptions(recursive=True))
    lines = [line.split("\t") for line in (tmp_path / "data.lst").read_text().splitlines()]
    img = np.zeros((8, 8, 3), np.uint8)
    w = recordio.MXIndexedRecordIO(str(tmp_path / "data.idx"), str(tmp_path / "data.rec"), "w")
    for key, _label, _path in lines:  # header label 99: the .lst must win
        w.write_idx(int(key), recordio.pack_img((0, 99.0, int(key), 0), img, img_fmt=".png"))
    w.close()
    labels = mxnet.run(
        """
        it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, path_imglist=lst,
                                   data_shape=(3, 8, 8), batch_size=6, shuffle=False)
        result = [l for batch in it for l in batch.label[0].asnumpy().tolist()]
        """,
        rec=str(tmp_path / "data.rec"),
        idx=str(tmp_path / "data.idx"),
        lst=str(tmp_path / "data.lst"),
    )
    assert labels == [float(label) for _key, label, _path in lines]
