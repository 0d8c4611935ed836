"""The keys a writer has written, to refuse a repeated one, in a bit a key
(docs/performance.md, "Scale"): a Python set took ~60 bytes a record, 6 GB
for 100M records. Integer keys from 0 up to a bound that grows with the
count (at most 16 bits a key written, and 1 MiB to start) are bits of one
buffer; any other key (a string key, or an integer far past the others)
goes into a set, so sparse keys cost what they did, dense ones 1-2 bits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["KeySet"]

_START_BITS = 8 << 20


class KeySet:
    __slots__ = ("_bits", "_count", "_others")

    def __init__(self, keys: Iterable[Any] = ()):
        self._bits = bytearray()
        self._others: set[Any] = set()
        self._count = 0
        for key in keys:
            self.add(key)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: Any) -> bool:
        if isinstance(key, int):  # (True is 1, as in a set)
            key = int(key)
        if type(key) is int and 0 <= key < len(self._bits) * 8:
            return bool(self._bits[key >> 3] & (1 << (key & 7)))
        return key in self._others

    def insert(self, key: Any) -> bool:
        """Add ``key``; False (and nothing changed) where it was there
        already. A writer's per-record check: one lookup, not two."""
        if type(key) is int and 0 <= key < len(self._bits) << 3:
            bits, byte, bit = self._bits, key >> 3, 1 << (key & 7)
            if bits[byte] & bit:
                return False
            bits[byte] |= bit
            self._count += 1
            return True
        if key in self:
            return False
        self._add_new(key)
        return True

    def add(self, key: Any) -> None:
        self.insert(key)

    def discard_new(self, key: Any) -> None:
        """Take back a key :meth:`insert` has just added (its record was
        not written after all)."""
        if isinstance(key, int):
            key = int(key)
        if type(key) is int and 0 <= key < len(self._bits) << 3:
            self._bits[key >> 3] &= ~(1 << (key & 7)) & 0xFF
        else:
            self._others.discard(key)
        self._count -= 1

    def _add_new(self, key: Any) -> None:
        if isinstance(key, int):
            key = int(key)
        self._count += 1
        if type(key) is int and key >= 0:
            bits = self._bits
            if key >= len(bits) * 8 and key < max(_START_BITS, 16 * self._count):
                # (doubling: the buffer's growth costs a constant a key)
                size = max(key // 8 + 1, 2 * len(bits), 1 << 10)
                size = min(size, max(_START_BITS, 16 * self._count) // 8 + 1)
                bits.extend(bytes(size - len(bits)))
                self._absorb()
            if key < len(bits) * 8:
                bits[key >> 3] |= 1 << (key & 7)
                return
        self._others.add(key)

    def _absorb(self) -> None:
        """Move the integers the grown buffer now covers out of the set."""
        limit = len(self._bits) * 8
        moved = [k for k in self._others if type(k) is int and 0 <= k < limit]
        for key in moved:
            self._others.discard(key)
            self._bits[key >> 3] |= 1 << (key & 7)
