"""``rec pack`` against the real im2rec.py (``make compat``)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from PIL import Image

from im2rec.executors import LocalExecutor
from im2rec.packing import PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, unpack

from ..conftest import MXNet, photo

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("pack")
    root = base / "imgs"
    root.mkdir()
    lines = []
    for i in range(40):
        name = f"{i:02d}.{'png' if i % 7 == 0 else 'jpg'}"
        photo(30 + 11 * (i % 9), 25 + 13 * (i % 5), i).save(root / name)
        labels = [f"{i % 4:f}"] if i % 3 else [f"{i % 4:f}", f"{i / 10:f}", "-1.000000"]
        lines.append("\t".join([str(39 - i), *labels, name]) + "\n")  # keys not in file order
    (base / "data.lst").write_text("".join(lines))
    return base


def packed_by_both(
    dataset: Path, tmp: Path, mxnet: MXNet, im2rec_args: list[str], options: PackOptions
) -> tuple[Path, Path]:
    for side in ("mx", "ours"):
        (tmp / side).mkdir()
        shutil.copy(dataset / "data.lst", tmp / side / "data.lst")
    mxnet.im2rec(str(tmp / "mx" / "data"), str(dataset / "imgs"), "--num-thread", "2", *im2rec_args)
    with LocalExecutor(2) as executor:
        pack_list(tmp / "ours" / "data.lst", options, root=dataset / "imgs", executor=executor)
    return tmp / "mx" / "data.rec", tmp / "ours" / "data.rec"


@pytest.mark.parametrize("pack_label", [False, True])
def test_pass_through_is_byte_identical(
    dataset: Path, tmp_path: Path, mxnet: MXNet, pack_label: bool
) -> None:
    extra = ["--pack-label"] if pack_label else []
    theirs, ours = packed_by_both(dataset, tmp_path, mxnet, ["--pass-through", *extra],
                                  PackOptions(pass_through=True, pack_label=pack_label))  # fmt: skip
    assert ours.read_bytes() == theirs.read_bytes()
    assert ours.with_suffix(".idx").read_bytes() == theirs.with_suffix(".idx").read_bytes()


def headers_and_sizes(rec: Path) -> list[tuple[object, ...]]:
    reader = IndexedRecordReader(rec)
    out = []
    for key in reader.keys:
        header, payload = unpack(reader.read_key(key))
        label = header.label.tolist() if header.flag else header.label
        img = Image.open(io.BytesIO(payload))
        out.append((key, header.flag, label, header.id, header.id2, img.size, img.format))
    return out


@pytest.mark.parametrize(
    ("args", "options"),
    [
        (["--resize", "24"], PackOptions(resize=24)),
        (
            ["--resize", "20", "--center-crop", "--pack-label"],
            PackOptions(resize=20, center_crop=True, pack_label=True),
        ),
        (["--center-crop", "--encoding", ".png"], PackOptions(center_crop=True, encoding=".png")),
    ],
    ids=["resize", "crop-resize-labels", "crop-png"],
)
def test_reencoded_records_match_im2rec(
    dataset: Path, tmp_path: Path, mxnet: MXNet, args: list[str], options: PackOptions
) -> None:
    """Same order, keys, header fields, image size and format; pixels differ
    only by the JPEG codec and resampler (Pillow here, OpenCV there)."""
    theirs, ours = packed_by_both(dataset, tmp_path, mxnet, args, options)
    assert headers_and_sizes(ours) == headers_and_sizes(theirs)


def test_image_record_iter_reads_reencoded_output(
    dataset: Path, tmp_path: Path, mxnet: MXNet
) -> None:
    shutil.copy(dataset / "data.lst", tmp_path / "data.lst")
    pack_list(
        tmp_path / "data.lst", PackOptions(resize=16, center_crop=True), root=dataset / "imgs"
    )
    result = mxnet.run(
        """
        it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 16, 16), batch_size=8)
        n, labels = 0, []
        for batch in it:
            n += batch.data[0].shape[0] - batch.pad
            labels += batch.label[0].asnumpy().tolist()[: batch.data[0].shape[0] - batch.pad]
        result = {"n": n, "labels": labels}
        """,
        rec=str(tmp_path / "data.rec"),
        idx=str(tmp_path / "data.idx"),
    )
    assert result["n"] == 40
    reader = IndexedRecordReader(tmp_path / "data.rec")
    expected = sorted(unpack(reader.read_key(k))[0].label for k in reader.keys)
    assert sorted(result["labels"]) == expected


SEED_COMMANDS = [
    ["--list", "--recursive"],
    ["--list", "--recursive", "--no-shuffle"],
    ["--pass-through", "--pack-label", "--num-thread", "8"],
    ["--resize", "256", "--quality", "90"],
]


def test_im2rec_drop_in_matches_im2rec_py(tmp_path: Path, mxnet: MXNet) -> None:
    """`im2rec PREFIX ROOT ...` (ours) and `python im2rec.py PREFIX ROOT ...`
    (MXNet's) make the same lists, the same pass-through bytes, and the same
    record headers when re-encoding."""
    import subprocess
    import sys

    root = tmp_path / "imgs"
    for c in range(3):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(6):
            photo(300 + 20 * i, 260 + 10 * c, 10 * c + i).save(root / f"c{c}" / f"{i}.jpg")
    ours_cmd = [sys.executable, "-m", "im2rec.cli.im2rec_compat"]
    for side in ("mx", "ours"):
        (tmp_path / side).mkdir()
    for args in SEED_COMMANDS:
        mxnet.im2rec(str(tmp_path / "mx" / "data"), str(root), *args)
        subprocess.run(
            [*ours_cmd, str(tmp_path / "ours" / "data"), str(root), *args],
            check=True,
            capture_output=True,
        )
        if "--list" in args:
            assert (tmp_path / "ours" / "data.lst").read_bytes() == (
                tmp_path / "mx" / "data.lst"
            ).read_bytes()
        elif "--pass-through" in args:
            for ext in (".rec", ".idx"):
                assert (tmp_path / "ours" / f"data{ext}").read_bytes() == (
                    tmp_path / "mx" / f"data{ext}"
                ).read_bytes()
        else:
            assert headers_and_sizes(tmp_path / "ours" / "data.rec") == headers_and_sizes(
                tmp_path / "mx" / "data.rec"
            )


def test_rebuilt_index_equals_im2rec_py_idx(dataset: Path, tmp_path: Path, mxnet: MXNet) -> None:
    """`rec index --keys id` reproduces the .idx im2rec.py wrote; `--keys seq`
    its offsets with keys 0..N-1, as MXNet's rec2idx.py does."""
    from im2rec.inspect.scanning import rebuild_index

    shutil.copy(dataset / "data.lst", tmp_path / "data.lst")
    mxnet.im2rec(
        str(tmp_path / "data"), str(dataset / "imgs"), "--pass-through", "--num-thread", "2"
    )
    written = (tmp_path / "data.idx").read_text()
    index, damages = rebuild_index(tmp_path / "data.rec", keys="id")
    assert not damages
    assert (
        "".join(
            f"{k}\t{o}\n" for k, o in zip(index.key_list(), index.offsets.tolist(), strict=True)
        )
        == written
    )
    seq, _ = rebuild_index(tmp_path / "data.rec")
    assert seq.key_list() == list(range(40))
    assert seq.offsets.tolist() == [int(line.split("\t")[1]) for line in written.splitlines()]
