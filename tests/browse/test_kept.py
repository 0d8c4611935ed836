"""The kept scan's file: read back as written, and never used when it is
cut short, lies about its sizes, names positions past the records, is a
link, or belongs to other files."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("aiohttp")  # (the browse package is the browse extra's)

from im2rec.browse.kept import BROKEN, Writer, kept_path, read_kept  # noqa: E402

IDENTITY = ['[1, 2, 3, 4, 5, "ab"]', '[6, 7, 8, 9, 10, "cd"]']


def _write(rec: Path, count: int = 5) -> str:
    writer = Writer(str(rec), count)
    writer.facts.bytes[:] = np.arange(count) * 100
    writer.facts.width[:] = 64
    writer.facts.state[2] = BROKEN
    labels, positions = np.array([0, 0, 3]), np.array([1, 4, 2])
    assert writer.finish(labels, positions, {"identities": IDENTITY, "classes": [[0, 2], [3, 1]]})
    return kept_path(str(rec))


@pytest.fixture
def rec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("IM2REC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "data.rec"
    path.write_bytes(b"")
    return path


def test_a_kept_scan_reads_back_as_written(rec: Path) -> None:
    path = _write(rec)
    kept = read_kept(path, 5, IDENTITY)
    assert kept is not None
    assert kept.facts.bytes.tolist() == [0, 100, 200, 300, 400]
    assert kept.facts.state.tolist() == [0, 0, BROKEN, 0, 0]
    assert kept.labels.tolist() == [0, 0, 3] and kept.positions.tolist() == [1, 4, 2]
    assert read_kept(path, 6, IDENTITY) is None  # (another record count)
    assert read_kept(path, 5, IDENTITY[::-1]) is None  # (other files)
    assert os.stat(path).st_mode & 0o077 == 0


def test_a_link_is_not_followed(rec: Path, tmp_path: Path) -> None:
    path = _write(rec)
    moved = tmp_path / "elsewhere.scan"
    os.replace(path, moved)
    os.symlink(moved, path)
    assert read_kept(path, 5, IDENTITY) is None


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # (each example writes anew)
@given(cut=st.integers(0, 300), word=st.integers(0, 3), value=st.integers(0, 2**40))
def test_a_damaged_file_is_not_used(rec: Path, cut: int, word: int, value: int) -> None:
    path = _write(rec)
    data = bytearray(Path(path).read_bytes())
    whole = bytes(data)
    struct.pack_into("<Q", data, 8 + 8 * min(word, 2), value)
    Path(path).write_bytes(bytes(data[: max(len(data) - cut, 0)]))
    kept = read_kept(path, 5, IDENTITY)
    if bytes(data[: max(len(data) - cut, 0)]) != whole:
        assert kept is None


def test_positions_past_the_records_are_not_used(rec: Path) -> None:
    writer = Writer(str(rec), 3)
    assert writer.finish(np.array([0]), np.array([7]), {"identities": IDENTITY})
    assert read_kept(kept_path(str(rec)), 3, IDENTITY) is None
