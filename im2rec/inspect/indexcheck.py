"""The ``.idx`` beside a walked ``.rec``: parsed on a thread while ``rec
info`` and ``rec verify`` walk the ``.rec`` (:func:`parse_ahead`), then
checked against the heads the walk found (:func:`index_problems`).

The parse (0.14 s for Objects365's 1.7M lines) used to follow the walk;
it now runs beside it, on the core the walk's reader leaves idle, and
before a walk from frame head to frame head it asks for the heads it
lists. Its thread is a daemon: a command stopped (Ctrl-C, an error in
the walk) does not wait for a parse nobody will use.
"""

from __future__ import annotations

import os
import threading
from array import array
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import Im2RecError
from ..recordio import read_index_entries
from ..recordio.index import index_arrays

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["SMALL_INDEX", "index_problems", "index_size", "parse_ahead"]

Parsed = tuple[Any, Any]  # (keys, offsets): what index_arrays gives
#: (offset or None, key or None, what is wrong): a problem, as verify's Problem takes it
Found = tuple[int | None, Any, str]

#: .idx bytes (about 250,000 lines) below which Python objects are cheap enough
SMALL_INDEX = 4 << 20
_PIECE = 1 << 16  # offsets looked up at a time: the temporaries stay small
#: bytes asked for either side of a head: its header, and the padding before it
_AROUND = 4096


def parse_ahead(
    path: str, *, lists: bool = False, hints: tuple[int, int, int] | None = None
) -> Callable[[], Parsed]:
    """Start parsing the ``.idx`` at ``path`` now, on a daemon thread:
    :func:`~im2rec.recordio.index.index_arrays`, or with ``lists``
    :func:`~im2rec.recordio.read_index_entries` (lists, no numpy). The call
    returned waits for the parse and gives its ``(keys, offsets)``, or
    raises what it raised.

    With ``hints`` ``(fd, size, most)``, the thread then asks the kernel to
    read the pages around each offset listed (in file order; an ``.idx`` of
    at most ``most`` entries), so that a walk of frame heads behind it finds
    them read: over a cold file it no longer waits for one read at a time
    (``posix_fadvise`` ``WILLNEED``: the reads are queued at once). Advice
    only: an offset outside the ``size`` bytes of the file ``fd``, a system
    without the call: no hint. The hints stop when the parse is asked for
    (the walk has ended)."""
    from concurrent.futures import Future  # (about 10 ms: only where a parse runs ahead)

    future: Future[Parsed] = Future()
    stop = threading.Event()

    def parse() -> None:
        try:
            parsed = read_index_entries(path) if lists else index_arrays(path)
        except BaseException as exc:  # (handed to the caller, raised there)
            future.set_exception(exc)
            return
        future.set_result(parsed)
        if hints is not None:
            _hint(parsed[1], *hints, stop)

    def result() -> Parsed:
        stop.set()
        return future.result()

    threading.Thread(target=parse, name="im2rec-index", daemon=True).start()
    return result


def _hint(offsets: Any, fd: int, size: int, most: int, stop: threading.Event) -> None:
    """:func:`parse_ahead`'s hints: the pages around each of ``offsets``."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None or len(offsets) > most:
        return
    for offset in sorted(o for o in offsets if 0 <= o < size):
        if stop.is_set():
            return
        try:
            advise(fd, max(offset - _AROUND, 0), 2 * _AROUND, os.POSIX_FADV_WILLNEED)
        except OSError:  # (the file closed under it: the walk has ended)
            return


def index_problems(
    path: str, heads: array[int], size: int, *, arrays: bool = False,
    parsed: Callable[[], Parsed] | None = None,
) -> tuple[int | None, list[Found]]:  # fmt: skip
    """The ``.idx`` against the record heads the walk found: every offset a
    head, every key once, as many entries as records. Returns the entries
    it lists (None when it does not parse) and what is wrong.

    A small index is checked with Python lists and a set (no numpy import:
    start-up is most of a small file's check); a large one, or any with
    ``arrays`` (numpy is in already), with arrays (8 bytes a record each)
    and sorting, not sets of Python ints: 5M records took 1.5 GB.
    ``parsed``: the parse, started beside the walk (:func:`parse_ahead`)."""
    name = path.rsplit("/", 1)[-1]
    keys: Any
    offsets: Any
    try:
        if parsed is not None:
            keys, offsets = parsed()
        elif index_size(path) < SMALL_INDEX and not arrays:
            keys, offsets = read_index_entries(path)
        else:
            keys, offsets = index_arrays(path)
        if arrays and isinstance(offsets, list):  # (a walk longer than it looked)
            keys, offsets = index_arrays(path)
    except Im2RecError as exc:
        return None, [(None, None, str(exc))]
    if isinstance(offsets, list):
        head_set = set(heads)
        bad = [i for i, off in enumerate(offsets) if off not in head_set]
        del head_set
        strays, dups = len(bad), [k for k, n in Counter(keys).items() if n > 1]
    else:
        strays, bad = _stray_offsets(offsets, heads)
        dups = _repeated(keys)
    found: list[Found] = []
    for i in bad[:20]:
        off = int(offsets[i])
        where = "past the end of the file" if off + 8 > size else "not the start of a record"
        found.append((off, _py(keys[i]), f"{name}: offset {off:,} is {where}"))
    if strays > 20:
        found.append((None, None, f"{name}: {strays - 20:,} more offsets are not record starts"))
    if dups:
        shown = ", ".join(map(repr, dups[:5])) + (", ..." if len(dups) > 5 else "")
        found.append((None, None, f"{name}: {len(dups):,} key(s) appear more than once: {shown}"))
    if len(offsets) != len(heads):
        found.append(
            (None, None, f"{name} lists {len(offsets):,} records, the file holds {len(heads):,}")
        )
    return len(offsets), found


def _stray_offsets(offsets: Any, heads: array[int]) -> tuple[int, list[int]]:
    """How many offsets are no record head, and the positions of the first 20."""
    import numpy as np

    starts = np.frombuffer(heads, dtype=np.int64) if len(heads) else np.empty(0, np.int64)
    if np.array_equal(offsets, starts):  # (the usual: the heads themselves, in order)
        return 0, []
    bad: list[int] = []
    strays = 0
    for begin in range(0, len(offsets), _PIECE):
        piece = offsets[begin : begin + _PIECE]
        at = np.minimum(np.searchsorted(starts, piece), max(len(starts) - 1, 0))
        stray = np.flatnonzero(starts[at] != piece) if len(starts) else np.arange(len(piece))
        strays += len(stray)
        if len(bad) < 20:
            bad.extend((stray[: 20 - len(bad)] + begin).tolist())
    return strays, bad


def index_size(path: str, missing: int | None = None) -> int:
    """A local file's size (``missing`` for one not there, when given), 0 for a URL."""
    from ..storage import is_url

    if is_url(path):
        return 0
    try:
        return os.path.getsize(path)
    except OSError:
        if missing is None:
            raise
        return missing


def _py(key: Any) -> Any:
    return key.item() if hasattr(key, "item") else key


def _repeated(keys: Any) -> list[Any]:
    """The keys that appear more than once (sorted int64 keys, else a Counter)."""
    import numpy as np

    if isinstance(keys, np.ndarray):
        if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()):  # (rising: none twice)
            return []
        ordered = np.sort(keys)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        return [int(k) for k in np.unique(repeated)]
    return [k for k, n in Counter(keys).items() if n > 1]
