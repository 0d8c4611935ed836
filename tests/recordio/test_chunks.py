"""Chunks: a file read front to back through reused chunks, views handed on
with a lease that keeps their bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.recordio.chunks import Chunks


@pytest.fixture
def data_file(tmp_path: Path) -> tuple[int, bytes]:
    data = os.urandom(200_000)
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield fd, data
    os.close(fd)


class Small(Chunks):
    SIZE = 4096
    CHUNKS = 4


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.integers(0, 6000), st.integers(0, 4096), st.booleans()), max_size=40))
def test_held_views_keep_their_bytes_while_later_chunks_are_read(
    data_file: tuple[int, bytes], reads: list[tuple[int, int, bool]]
) -> None:
    """Whatever the reads (forward, across a chunk's end, past the file's
    end), a leased view keeps the bytes it had, and the pool never grows
    past CHUNKS."""
    fd, data = data_file
    chunks, kept, pos = Small(fd, len(data)), [], 0
    for step, n, keep in reads:
        pos += step
        view, lease = chunks.hold(pos, n)
        assert bytes(view) == data[pos : pos + n]
        if keep:
            kept.append((pos, view, lease))
        assert len(chunks.chunks) <= Small.CHUNKS
    for start, view, lease in kept:
        if lease is not None:
            assert bytes(view) == data[start : start + len(view)]
    leased = {id(lease) for _, _, lease in kept if lease is not None}
    assert len(leased) <= Small.CHUNKS


def test_chunks_whose_views_are_gone_are_filled_again(data_file: tuple[int, bytes]) -> None:
    """A reader that writes each view and drops it reuses two chunks: no
    new memory per read."""
    fd, data = data_file
    chunks, pos, out = Small(fd, len(data)), 0, bytearray()
    while pos < len(data):
        view, lease = chunks.hold(pos, 1000)
        assert lease is not None
        out += view
        pos += len(view)
        del view, lease
    assert out == data
    assert len(chunks.chunks) <= 2


def test_past_chunks_views_are_not_leased(data_file: tuple[int, bytes]) -> None:
    fd, data = data_file
    chunks = Small(fd, len(data))
    held = [chunks.hold(i * 4096, 4096) for i in range(Small.CHUNKS + 3)]
    assert [lease is not None for _, lease in held] == [True] * Small.CHUNKS + [False] * 3
    for i, (view, _) in enumerate(held[: Small.CHUNKS]):
        assert bytes(view) == data[i * 4096 : (i + 1) * 4096]
    assert len(chunks.chunks) == Small.CHUNKS
