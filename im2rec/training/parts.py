"""Which records an MXNet iterator's part reads, and in what order: the
record offsets (from the ``.idx``, or a walk of the ``.rec``), MXNet's
split into parts, the spans each record ends at, shuffle chunks and each
epoch's order (docs/format.md, "ImageRecordIter")."""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..recordio import RecordReader, build_index, load_index
from ..storage import exists, is_url, sibling

__all__ = ["chunk_starts", "epoch_order", "local_size", "part", "record_offsets", "record_stops"]


def chunk_starts(
    offsets: np.ndarray, chunk_mb: int, num_parts: int, path_imgidx: str | os.PathLike[str]
) -> np.ndarray | None:
    """MXNet's ``shuffle_chunk_size`` without an ``.idx``: the part is cut
    into ``ceil(bytes * 1.1 / (num_parts * chunk))`` byte ranges whose order
    is shuffled every epoch. Returns the position where each range's first
    record is, or None when it does not apply (no chunk size, an ``.idx``
    given, or a single range)."""
    if chunk_mb <= 0 or path_imgidx or len(offsets) == 0:
        return None
    span = int(offsets[-1]) - int(offsets[0]) + 1
    count = math.ceil(span * 1.1 / (num_parts * (chunk_mb << 20)))
    if count <= 1:
        return None
    bounds = int(offsets[0]) + np.arange(count) * (span / count)
    starts = np.unique(np.searchsorted(offsets, bounds))
    return starts[starts < len(offsets)]


def epoch_order(
    n: int, shuffle: bool, seed: int, epoch: int, chunks: np.ndarray | None, chunk_seed: int
) -> np.ndarray:
    """The order of one epoch's records: a full permutation with
    ``shuffle``; with chunks, the chunks in a permuted order (seeded by
    ``shuffle_chunk_seed`` and the epoch), each shuffled inside with
    ``shuffle``, as MXNet reads them."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, epoch])
    if chunks is None:
        return rng.permutation(n) if shuffle else np.arange(n)
    ends = [*chunks[1:].tolist(), n]
    pieces = [np.arange(a, b) for a, b in zip(chunks.tolist(), ends, strict=True)]
    visit = np.random.default_rng([chunk_seed & 0xFFFFFFFF, epoch]).permutation(len(pieces))
    return np.concatenate([rng.permutation(pieces[i]) if shuffle else pieces[i] for i in visit])


def record_offsets(
    rec: str,
    idx: str,
    verbose: bool,
    storage_options: dict[str, Any] | None = None,
) -> np.ndarray:
    """Byte offsets of every record, in file order. MXNet's indexed reader
    sorts the ``.idx`` offsets and ignores its keys (docs/format.md,
    "Which records, in which order"); without an ``.idx`` the file's
    headers are walked once, in memory."""
    if not rec or any(c in rec for c in ";*?"):
        raise ConfigError(
            f"path_imgrec must name one .rec file, not {rec!r} (lists and patterns of "
            "files are not supported; merge them with `rec merge`)"
        )
    reader = RecordReader(rec, storage_options=storage_options)
    try:
        index = load_index(idx, storage_options=storage_options) if idx else build_index(reader)
        index.check_within(reader.size, reader.name)
        offsets = np.unique(index.offsets)
        if len(offsets) == 0:
            raise ConfigError(f"{rec}: holds no records")
        reader.read_at(int(offsets[-1]))  # a file cut short fails here, not mid-epoch
        if not idx and verbose:
            print(f"im2rec: {_walked(rec, len(offsets), storage_options)}", file=sys.stderr)
    finally:
        reader.close()
    return offsets


def _walked(rec: str, records: int, storage_options: dict[str, Any] | None) -> str:
    """What the iterator says when it indexed the records itself: and, when
    an .idx lies beside the .rec, why it did not use it (MXNet reads an
    index only when given one, and its parts are cut differently without,
    so taking it unasked would change which records a part reads)."""
    beside = sibling(rec, ".idx")
    said = f"indexed {records:,} records of {rec} in memory, path_imgidx not given"
    if exists(beside, storage_options):
        return f"{said} ({beside} is beside it: pass path_imgidx={beside!r} to use it)"
    return said


def local_size(rec: str) -> int | None:
    """A local ``.rec``'s size, or None (a URL, read as it always is)."""
    if is_url(rec):
        return None
    try:
        return os.stat(rec).st_size
    except OSError:
        return None


def record_stops(every: np.ndarray, offsets: np.ndarray, size: int) -> np.ndarray:
    """Where the records at ``offsets`` end: the next offset of ``every``
    (all the file's, sorted, as :func:`record_offsets` gives them), or
    ``size`` after the last. A span that is not one whole record (a gap,
    a file changed since) is only read the slower way, never misread:
    :meth:`~im2rec.recordio.RecordReader.read_span` checks."""
    after = np.searchsorted(every, offsets, side="right")
    stops = np.full(len(offsets), size, np.int64)
    inside = after < len(every)
    stops[inside] = every[after[inside]]
    return stops


def part(offsets: np.ndarray, num_parts: int, part_index: int) -> np.ndarray:
    """MXNet's count split with an index (docs/format.md, "Which records,
    in which order"): ``ceil(N / num_parts)`` records per part, the last
    part shorter."""
    if num_parts < 1 or not 0 <= part_index < num_parts:
        raise ConfigError(
            f"need num_parts >= 1 and 0 <= part_index < num_parts, got {part_index} of {num_parts}"
        )
    per = math.ceil(len(offsets) / num_parts)
    part = offsets[part_index * per : (part_index + 1) * per]
    if len(part) == 0:
        raise ConfigError(
            f"part {part_index} of {num_parts} holds no records ({len(offsets)} records, "
            f"{per} per part); use at most {math.ceil(len(offsets) / per)} parts"
        )
    return part
