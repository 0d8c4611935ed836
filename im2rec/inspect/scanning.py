"""``rec index``: a ``.rec``'s index rebuilt from a walk of its frames
(:mod:`im2rec.recordio.walking`), keeping 8 bytes a record.
"""

from __future__ import annotations

import os
from array import array
from typing import Literal

from ..errors import Im2RecError, RecordFormatError
from ..recordio import RecordIndex, RecordReader
from ..recordio.walking import Damage, header_at, walk_records

__all__ = ["rebuild_index"]


def rebuild_index(
    path: str | os.PathLike[str],
    *,
    keys: Literal["seq", "id"] = "seq",
    recover: bool = False,
) -> tuple[RecordIndex, list[Damage]]:
    """Index a ``.rec``: keys 0..N-1 (``seq``, like rec2idx.py) or each
    record's header id (``id``, what im2rec.py writes)."""
    reader = RecordReader(path)
    buf, _ = reader.mapping()
    offsets = array("q")  # 8 bytes a record: millions of records stay small
    ids = array("Q")
    damages: list[Damage] = []
    for item in walk_records(reader, recover=recover):
        if isinstance(item, Damage):
            damages.append(item)
            continue
        offsets.append(item[0])
        if keys == "id":
            try:
                ids.append(int(header_at(buf, item[0], item[1], reader.name).id))
            except RecordFormatError as exc:
                raise Im2RecError(f"{exc}; index it with --keys seq instead") from None
    if keys == "seq":  # numpy-free: `rec index` starts fast
        return RecordIndex(range(len(offsets)), offsets, f"{reader.name} (rebuilt)"), damages
    import numpy as np

    key_array = np.frombuffer(ids, dtype=np.uint64) if ids else np.empty(0, np.uint64)
    ordered = np.sort(key_array)
    dups = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(dups):
        again = int(np.flatnonzero(key_array == dups[0])[1])
        raise Im2RecError(
            f"{reader.name}: header id {int(dups[0])} appears in more than one record (again "
            f"at byte {offsets[again]:,}); use --keys seq"
        )
    # ids at or past 2**63 do not fit int64 keys: kept exact, as Python ints
    big = len(ordered) and int(ordered[-1]) >= 1 << 63
    index_keys = key_array.tolist() if big else key_array.astype(np.int64)
    return RecordIndex(index_keys, offsets, f"{reader.name} (rebuilt)"), damages
