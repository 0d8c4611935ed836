"""Damaged files, generated: whatever the damage, every reader and command
either works or fails with one of our errors (a clear message, a documented
exit code), never another exception; ``verify`` reports instead of failing."""

from __future__ import annotations

import io
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from im2rec.cli import main as cli
from im2rec.errors import Im2RecError
from im2rec.inspection import rebuild_index, summarise, verify
from im2rec.iterator import ImageRecordIter
from im2rec.loader import RecordDataset
from im2rec.recordio import (
    IndexedRecordReader,
    IndexedRecordWriter,
    RecordReader,
    build_index,
    load_index,
    pack,
    unpack,
)
from im2rec.recordio.framing import MAGIC_BYTES


def _image(fmt: str, seed: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (12 + seed, 9), (seed * 40 % 256, 90, 200)).save(out, fmt)
    return out.getvalue()


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """Image records (JPEG, PNG), a multi-label one, one split around a
    magic word, an empty one: the framing's every case."""
    path = tmp_path_factory.mktemp("damage") / "base.rec"
    payloads = [
        pack((0, 1.0, 0, 0), _image("JPEG", 1)),
        pack((0, [2.0, 0.5, 7.0], 1, 0), _image("PNG", 2)),
        pack((0, 3.0, 2, 0), _image("JPEG", 3)[:40] + MAGIC_BYTES + b"tail" * 5),
        b"",
        pack((0, 5.0, 4, 0), _image("JPEG", 4)),
    ]
    with IndexedRecordWriter(path) as w:
        for key, payload in enumerate(payloads):
            w.write_key(key, payload)
    return path.read_bytes(), path.with_suffix(".idx").read_bytes()


def _near_a_frame(data: bytes, draw: st.DrawFn) -> int:
    """A position in ``data``, most often at or just around a frame header
    (where damage is subtle: a cut right after a part, a wrong length)."""
    heads = [i for i in range(0, len(data) - 3, 4) if data[i : i + 4] == MAGIC_BYTES]
    if not heads or draw(st.booleans()):
        return draw(st.integers(0, len(data) - 1))
    pos = draw(st.sampled_from(heads)) + draw(st.integers(-8, 12))
    return min(max(pos, 0), len(data) - 1)


def _damage(data: bytes, draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["truncate", "bytes", "words"]))
    if kind == "truncate":
        return data[: _near_a_frame(data, draw)]
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        if kind == "bytes":
            out[_near_a_frame(data, draw)] = draw(st.integers(0, 255))
        else:  # plausible frame words: a magic, or a length word with any flag
            pos = min(_near_a_frame(data, draw) // 4 * 4, len(out) - 4)
            word = draw(
                st.one_of(
                    st.just(MAGIC_BYTES),
                    st.builds(
                        lambda cflag, n: struct.pack("<I", cflag << 29 | n),
                        st.integers(0, 3),
                        st.integers(0, 2**29 - 1) | st.integers(0, 64),
                    ),
                )
            )
            out[pos : pos + 4] = word
    return bytes(out)


@st.composite
def damaged(draw: st.DrawFn, original: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    """The .rec damaged, or one line of the .idx replaced."""
    rec, idx = original
    if draw(st.booleans()):
        return _damage(rec, draw), idx
    lines = idx.decode().splitlines(keepends=True)
    i = draw(st.integers(0, len(lines) - 1))
    lines[i] = draw(st.sampled_from(["", "x\ty\n", "1\t3\n", "9\t-4\n", "2\t99999\n", "0\t0\n"]))
    return rec, "".join(lines).encode()


def _ours_or_nothing(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Im2RecError:
        return None


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_damage_fails_only_with_our_errors(
    original: tuple[bytes, bytes], tmp_path: Path, data: st.DataObject
) -> None:
    rec_bytes, idx_bytes = data.draw(damaged(original))
    work = tmp_path / "case"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    rec, idx = work / "d.rec", work / "d.idx"
    rec.write_bytes(rec_bytes)
    idx.write_bytes(idx_bytes)

    report = verify(rec, decode=True)  # reports, never raises, for any .rec damage
    assert report.ok == (not report.problems)
    _ours_or_nothing(lambda: list(RecordReader(rec)))
    _ours_or_nothing(lambda: build_index(RecordReader(rec)))
    index, _damages = rebuild_index(rec, recover=True)
    assert len(index) == report.records
    _ours_or_nothing(rebuild_index, rec, keys="id")
    _ours_or_nothing(summarise, rec)

    def read_everything() -> None:
        reader = IndexedRecordReader(rec)
        for i in range(len(reader)):
            _ours_or_nothing(lambda i=i: unpack(reader[i]))
        dataset = RecordDataset(rec, output="numpy")
        for i in range(len(dataset)):
            _ours_or_nothing(dataset.__getitem__, i)

    _ours_or_nothing(read_everything)

    def iterate(on_corrupt: str, path_imgidx: str) -> None:
        with ImageRecordIter(
            path_imgrec=str(rec), path_imgidx=path_imgidx, data_shape=(3, 8, 8), batch_size=2,
            preprocess_threads=1, on_corrupt=on_corrupt, verbose=False,
        ) as it:  # fmt: skip
            for batch in it:
                assert batch.data[0].shape == (2, 3, 8, 8)

    for on_corrupt in ("raise", "skip"):
        for path_imgidx in (str(idx), ""):
            _ours_or_nothing(iterate, on_corrupt, path_imgidx)

    runner = CliRunner()
    for args in (
        ["verify", "--decode", str(rec)],
        ["info", str(rec)],
        ["index", str(rec), "-o", str(work / "new.idx")],
        ["unpack", str(rec), str(work / "out")],
        ["show", str(rec), "-o", str(work / "sheet.png")],
        ["merge", str(rec), str(rec), "-o", str(work / "merged.rec"), "--renumber"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code in (0, 1), (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            result.exception,
        )
    if (work / "merged.rec").exists():  # never a merged file that is not whole
        merged = verify(work / "merged.rec")
        assert merged.ok and merged.records == 2 * len(load_index(idx)), merged.problems
