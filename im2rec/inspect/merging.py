"""Putting ``.rec`` files together: ``merge_recs`` concatenates them and
shifts their ``.idx`` offsets, each input checked whole first."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (
    DatasetError,
    DuplicateKeyError,
    IndexFormatError,
    MissingFileError,
    NotRecordIOError,
    RecordFormatError,
    TruncatedRecordError,
)
from ..recordio import RecordIndex, RecordReader
from ..recordio.codec import can_start
from ..recordio.framing import not_recordio
from ..recordio.index import index_arrays
from ..recordio.walking import walk_records
from ..storage.atomic import AtomicGroup
from ..storage.files import open_regular
from .verifying import bad_padding, padding_message

__all__ = ["merge_recs"]


def merge_recs(
    inputs: list[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    renumber: bool = False,
    overwrite: bool = True,
) -> tuple[int, int]:
    """Concatenate ``.rec`` files (and their ``.idx``, offsets shifted) into
    ``out`` and its ``.idx``. Returns ``(records, bytes)``. With
    ``overwrite=False`` an existing ``out`` (or its ``.idx``) is an error.

    Each input's record headers are walked first (cheap: 8 bytes a record)
    and its ``.idx`` checked against them: a damaged input would otherwise
    make a merged file whose index points into the next input's bytes.
    Memory: each input's keys and offsets as int64 arrays (16 bytes a
    record, 8 with ``renumber``); the ``.idx`` is written input by input."""
    target = Path(out)
    existing = [p for p in (target, target.with_suffix(".idx")) if p.exists()]
    if existing and not overwrite:
        raise DatasetError(
            f"{existing[0]}: already exists; pass --overwrite to replace it, or choose another -o"
        )
    keys: list[Any] = []  # each input's: an int64 array (string keys: a list), or None
    offsets: list[np.ndarray] = []
    sizes: list[int] = []  # each input's size when it was checked
    for path in map(Path, inputs):
        if not path.exists():
            raise MissingFileError(f"{path}: record file not found")
        fd, _ = open_regular(path)
        try:
            wrong = not_recordio(str(path), os.pread(fd, 4, 0))
        finally:
            os.close(fd)
        if wrong is not None:  # (before its .idx, which a list or an image has none of)
            raise NotRecordIOError(f"{wrong}; nothing was merged")
        these, offs = _checked_index(path.with_suffix(".idx"))
        sizes.append(_check_whole(path, offs))
        keys.append(None if renumber else these)
        offsets.append(offs)
    if not renumber:
        _refuse_shared_keys(keys, [Path(p) for p in inputs])
    count, base = 0, 0
    with AtomicGroup() as group:
        with group.open(target) as dst:
            for path, size in zip(map(Path, inputs), sizes, strict=True):
                _copy_exactly(path, size, dst)
        with group.open(target.with_suffix(".idx")) as f:  # a piece at a time: memory flat
            for these, offs, size in zip(keys, offsets, sizes, strict=True):
                part_keys = range(count, count + len(offs)) if these is None else these
                for piece in RecordIndex(part_keys, offs + base).text_pieces():
                    f.write(piece.encode("utf-8"))
                count, base = count + len(offs), base + size
    return count, base


def _checked_index(idx: Path) -> tuple[Any, np.ndarray]:
    """An input's keys and offsets, checked as load_index checks them, without
    the lookup table (nothing is looked up)."""
    keys, offsets = index_arrays(idx)
    bad = np.flatnonzero(~can_start(offsets))
    if len(bad):
        raise IndexFormatError(
            f"{idx}: offset {int(offsets[bad[0]]):,} cannot start a record (offsets are "
            "non-negative multiples of 4); nothing was merged: rebuild the index with "
            f"`rec index {idx.with_suffix('.rec')}`"
        )
    _refuse_shared_keys([keys], [idx.with_suffix(".rec")])
    return keys, offsets


def _refuse_shared_keys(keys: list[Any], paths: list[Path]) -> None:
    """A key in two inputs (or twice in one) is an error naming both: the
    int64 keys sorted together find it (8 bytes a record)."""
    if all(isinstance(k, np.ndarray) for k in keys):
        together = keys[0] if len(keys) == 1 else np.concatenate(keys) if keys else None
        ordered = np.sort(together) if together is not None else np.empty(0, np.int64)
        del together
        dups = ordered[1:][ordered[1:] == ordered[:-1]]
        if not len(dups):
            return
        key = int(dups[0])
        owners = [i for i, k in enumerate(keys) if bool((k == key).any())]
        within = len(owners) == 1  # (twice in one input)
        first, second = paths[owners[0]], paths[owners[-1]]
    else:  # string keys: a dict of them, as their index holds one anyway
        owner: dict[Any, int] = {}
        within = False
        for i, these in enumerate(keys):
            seen: set[Any] = set()
            for key in these:
                at = owner.setdefault(key, i)
                if at != i or key in seen:
                    first, second, within = paths[at], paths[i], at == i
                    break
                seen.add(key)
            else:
                continue
            break
        else:
            return
    if within:
        raise DuplicateKeyError(
            f"{first.with_suffix('.idx')}: key {key!r} appears more than once; nothing was "
            f"merged: rebuild the index with `rec index {first}`"
        )
    raise DuplicateKeyError(
        f"key {key!r} is in both {first.with_suffix('.idx')} and "
        f"{second.with_suffix('.idx')}; pass --renumber to use 0..N-1"
    )


def _copy_exactly(path: Path, size: int, dst: Any) -> None:
    """Copy the ``size`` bytes ``path`` had when it was checked; a file that
    changed since (another program truncated or rewrote it) is an error, not
    a merged file whose index points past or into the wrong bytes."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as src:
        left = size
        while left:
            block = src.read(min(left, 1 << 22))
            if not block:
                break
            dst.write(block)
            left -= len(block)
        if left or src.read(1):
            raise TruncatedRecordError(
                f"{path}: it changed while it was being merged (it had {size:,} bytes when "
                "checked); nothing was merged: run again once no other program writes it"
            )


def _padded(buf: Any, item: Any, path: Path) -> int:
    """The record's head, after checking its padding (see bad_padding)."""
    at = bad_padding(buf, *item)
    if at is not None:
        raise RecordFormatError(f"{path}: {padding_message(at)}")
    return int(item[0])


def _check_whole(path: Path, offsets: np.ndarray) -> int:
    """Raise unless ``path`` is whole (every frame intact, nothing after the
    last) and ``offsets`` (its ``.idx``) name each of its records once;
    return the size that was checked. Memory: the heads (8 bytes a record,
    grown a little at a time, not doubled) and a flag a record; the offsets
    are looked up a piece at a time."""
    from array import array

    reader = RecordReader(path)
    size = reader.size
    buf = reader.mapping()[0]
    found = array("q")
    try:
        found.extend(_padded(buf, item, path) for item in walk_records(reader))
    except NotRecordIOError as exc:
        raise NotRecordIOError(f"{exc}; nothing was merged") from None
    except RecordFormatError as exc:
        raise type(exc)(f"{exc}; nothing was merged: check it with `rec verify {path}`") from None
    finally:
        reader.close()
    heads = np.frombuffer(found, dtype=np.int64) if len(found) else np.empty(0, np.int64)
    idx = path.with_suffix(".idx")
    fix = f"nothing was merged: rebuild the index with `rec index {path}`"
    listed = np.zeros(len(heads), dtype=bool)
    for start in range(0, len(offsets), 1 << 20):
        piece = offsets[start : start + (1 << 20)]
        at = np.minimum(np.searchsorted(heads, piece), max(len(heads) - 1, 0))
        bad = piece[heads[at] != piece] if len(heads) else piece
        if len(bad):
            raise IndexFormatError(
                f"{idx}: offset {int(bad[0]):,} is not the start of a record in {path}; {fix}"
            )
        listed[at] = True
    # every offset is a head: each head listed once <=> as many of each, all listed
    if len(offsets) != len(heads) or not bool(listed.all()):
        raise IndexFormatError(
            f"{idx}: lists {len(offsets):,} entries for the {len(heads):,} records of {path} "
            f"(each record must be listed once); {fix}"
        )
    return size
