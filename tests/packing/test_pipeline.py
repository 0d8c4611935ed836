"""Packing one list: the same bytes whatever the worker count, the list's lock
released while forked workers live, payloads holding the magic word split as
MXNet writes them, and the manifest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from im2rec.executors import LocalExecutor
from im2rec.packing import PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, unpack

from ..conftest import write_lst


@pytest.mark.slow
def test_any_worker_count_gives_the_same_bytes(photos: Path, tmp_path: Path) -> None:
    outputs = []
    for workers in (1, 2, 3):
        with LocalExecutor(workers) as executor:
            result = pack_list(photos, PackOptions(resize=24), executor=executor)
        outputs.append((result.rec.read_bytes(), result.idx.read_bytes()))
        with LocalExecutor(workers) as executor:
            result = pack_list(photos, PackOptions(pass_through=True), executor=executor)
        outputs.append((result.rec.read_bytes(), result.idx.read_bytes()))
    assert outputs[0::2] == [outputs[0]] * 3 and outputs[1::2] == [outputs[1]] * 3


@pytest.mark.slow
def test_the_lock_is_released_while_forked_workers_live(photos: Path) -> None:
    """Workers forked during a pack share the locked file; the lock must not
    outlive the pack (the same pool packs the list again, and so may others)."""
    import fcntl

    with LocalExecutor(2) as executor:
        pack_list(photos, PackOptions(resize=24), executor=executor)
        pack_list(photos, PackOptions(resize=24), executor=executor, resume=True)
        fd = os.open(photos, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if still held
        finally:
            os.close(fd)


def test_manifest(photos: Path) -> None:
    import hashlib

    result = pack_list(photos, PackOptions(pass_through=True))
    manifest = json.loads(result.manifest.read_text())
    assert manifest["records"] == 120 and manifest["failures"] == {}
    for key, path in (("rec", result.rec), ("idx", result.idx)):
        assert manifest[key]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert manifest[key]["bytes"] == path.stat().st_size
    assert manifest["options"]["pass_through"] is True and manifest["list"]["entries"] == 120
    assert not list(photos.parent.glob("*.partial*"))


@pytest.mark.parametrize("workers", [1, 2])
def test_payloads_holding_the_magic_word_are_split_as_mxnet_writes_them(
    tmp_path: Path, workers: int
) -> None:
    """Workers tell the writer whether a record must be split (so it does
    not scan every image again): a wrong answer would write a record that
    readers cut at the magic word. Pass-through files with the magic word
    at aligned, unaligned and no offsets, small and large."""
    from im2rec.recordio import frame, pack
    from im2rec.recordio.framing import MAGIC_BYTES

    root = tmp_path / "files"
    root.mkdir()
    payloads = {
        "aligned.jpg": b"abcd" * 5
        + MAGIC_BYTES
        + b"x" * 9,  # aligned once the 24-byte header is on
        "unaligned.jpg": b"ab" + MAGIC_BYTES + b"y" * 7,
        "big_aligned.jpg": bytes(100_000) + MAGIC_BYTES + bytes(31) + MAGIC_BYTES,
        "plain.jpg": b"z" * 70_000,
    }
    for name, data in payloads.items():
        (root / name).write_bytes(data)
    lst = write_lst(tmp_path / "m.lst", list(payloads), [[1.0]] * len(payloads))
    with LocalExecutor(workers) as pool:
        pack_list(lst, PackOptions(pass_through=True), root=root, executor=pool)
    expected = b"".join(
        frame(pack((0, 1.0, key, 0), data)) for key, data in enumerate(payloads.values())
    )
    assert (tmp_path / "m.rec").read_bytes() == expected
    reader = IndexedRecordReader(tmp_path / "m.rec")
    assert [unpack(reader.read_key(k))[1] for k in range(4)] == list(payloads.values())
