"""The magic-word scan (``im2rec.recordio._words.has_word``) against its
definition: the word at a multiple of 4 from the buffer's start; and the
whole-record frame (``_words.frame``) against the record's layout; the
block walk (``_words.whole_frames``) against the same walk in Python, and
its copy of the header fields against numpy's reading of them."""

from __future__ import annotations

import atheris
from _harness import run

with atheris.instrument_imports():
    import numpy as np

    from im2rec.recordio import _words, blocks


def test_one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    word = fdp.ConsumeBytes(fdp.PickValueInList([4, 4, 4, 3, 5]))
    start = fdp.ConsumeIntInRange(0, 3)
    buf = memoryview(fdp.ConsumeBytes(fdp.remaining_bytes()))[start:]
    try:
        found = _words.has_word(buf, word)
    except ValueError:
        assert len(word) != 4
        return
    want = any(bytes(buf[i : i + 4]) == word for i in range(0, len(buf) - 3, 4))
    assert found == want, (bytes(buf), word)
    framed = _words.frame(buf)
    if _words.has_word(buf, MAGIC):
        assert framed is None
        return
    n = len(buf)
    assert framed == MAGIC + n.to_bytes(4, "little") + bytes(buf) + bytes(-n % 4), bytes(buf)
    walk(bytes(buf), 4 * fdp_start(data))


def fdp_start(data: bytes) -> int:
    return data[0] % 4 if data else 0


def walk(data: bytes, start: int) -> None:
    """The C block walk and the Python one agree on any bytes, any room;
    the header fields it copies are those numpy reads at the heads."""
    if start > len(data):
        return
    for room in (0, 1, 3, len(data) // 8 + 1):
        ours, theirs = np.zeros(room, np.int64), np.zeros(room, np.int64)
        got = _words.whole_frames(data, start, ours)
        want = blocks._whole_frames(data, start, theirs)
        assert got == want and np.array_equal(ours, theirs), (data, start, room, got, want)
        fields = np.zeros(room, blocks.HEADER_FIELDS)
        assert _words.whole_frames(data, start, ours, fields) == got
        read = blocks.Block(data, 0, ours[: got[0]]).header_fields()
        assert fields[: got[0]].tobytes() == read.tobytes(), (data, start, room)


MAGIC = (0xCED7230A).to_bytes(4, "little")


if __name__ == "__main__":
    run(test_one)
