"""The order ``rec pack --layout insightface`` packs a list in: grouped by
identity, the identities in the order they first appear and each one's
lines in list order; planned without holding the list (docs/performance.md,
"Scale").

A list whose identities are already together (``rec list`` writes one so: a
folder an identity) is packed in its own order: the plan holds a bit an
identity, and the staging list is made by reading the list again. A list
whose identities are interleaved is held compactly while its staging list
is written: its lines' text in one buffer, and 32 bytes a line (identity,
line number, end offset, position in the grouped order)."""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import DatasetError
from ..formats.insightface import identity_of_label
from ..listing.lstfile import ListItem, item_line, iter_lst
from ..recordio.keyset import KeySet

__all__ = ["IdentityPlan", "plan_identities"]

_PIECE = 1 << 11  # lines a piece of the staging list


@dataclass
class _Interleaved:
    """The lines of a list whose identities are interleaved."""

    text: bytearray  # every line's item_line, in list order
    ends: array[int]  # end of each line's text in ``text``
    lines: array[int]  # each line's number in the list
    order: array[int]  # positions in the grouped order


@dataclass
class IdentityPlan:
    lst: Path
    count: int  # entries in the list
    interleaved: _Interleaved | None = None  # None: the list is grouped already

    def grouped_text(self) -> Iterator[bytes]:
        """The staging list's text (the entries grouped), a piece at a time."""
        held = self.interleaved
        if held is None:
            items = self._items()
            while piece := list(itertools.islice(items, _PIECE)):
                yield "".join(map(item_line, piece)).encode("utf-8")
            return
        text, ends, order = held.text, held.ends, held.order
        for start in range(0, len(order), _PIECE):
            yield b"".join(
                text[ends[p - 1] if p else 0 : ends[p]] for p in order[start : start + _PIECE]
            )

    def user_lines(self, staged: Iterable[int]) -> dict[int, int]:
        """``{staging line number: line number in the user's list}``."""
        wanted = set(staged)
        held = self.interleaved
        if held is not None:
            return {n: held.lines[held.order[n - 1]] for n in wanted}
        found: dict[int, int] = {}
        for n, item in enumerate(self._items(), 1):
            if n in wanted:
                found[n] = item.line
        return found

    def _items(self) -> Iterator[ListItem]:
        return iter_lst(self.lst)


def _identity(item: ListItem, lst: Path) -> int:
    identity = identity_of_label(item.labels)
    if identity is None:
        raise DatasetError(
            f"{lst}:{item.line}: label {item.labels[0]:g} is not an identity (a whole number "
            ">= 0); the InsightFace layout groups images by identity"
        )
    return identity


def plan_identities(lst: Path) -> IdentityPlan:
    """Read ``lst`` (every label checked), and plan its grouped order."""
    count, grouped, previous, seen = 0, True, -1, KeySet()
    for item in iter_lst(lst):
        identity = _identity(item, lst)
        count += 1
        if identity != previous:
            if identity in seen:
                grouped = False
            seen.add(identity)
            previous = identity
    if grouped:
        return IdentityPlan(lst, count)
    return IdentityPlan(lst, count, _hold(lst))


def _hold(lst: Path) -> _Interleaved:
    import numpy as np

    text, ends, lines, identities = bytearray(), array("q"), array("q"), array("q")
    for item in iter_lst(lst):
        text += item_line(item).encode("utf-8")
        ends.append(len(text))
        lines.append(item.line)
        identities.append(_identity(item, lst))
    ids = np.frombuffer(identities, np.int64)
    unique, first = np.unique(ids, return_index=True)
    rank = np.empty(len(unique), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(unique))
    grouped = np.argsort(rank[np.searchsorted(unique, ids)], kind="stable")
    return _Interleaved(text, ends, lines, array("q", grouped.astype(np.int64).tobytes()))
