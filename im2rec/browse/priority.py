"""The page before the scans: ``rec browse``'s background scans give way
to the requests of the page in hand (:class:`PageFirst`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GIVE_WAY", "PageFirst"]

#: seconds a scan waits, before each block, for the page's requests in hand
GIVE_WAY = 0.25


class PageFirst:
    """The page's requests in hand (:meth:`serving`), which the background
    scans give way to: before each block a scan waits until none is left,
    for at most ``most`` seconds, so a grid shows at once whatever a scan
    reads, and a page asking without pause slows a scan, never stops it."""

    def __init__(self, most: float = GIVE_WAY) -> None:
        self.most = most
        self.waiting = 0  # (scans waiting now)
        self._serving = 0
        self._changed = threading.Condition()

    @contextmanager
    def serving(self) -> Iterator[None]:
        with self._changed:
            self._serving += 1
        try:
            yield
        finally:
            with self._changed:
                self._serving -= 1
                self._changed.notify_all()

    def give_way(self) -> None:
        with self._changed:
            self.waiting += 1
            self._changed.wait_for(lambda: not self._serving, timeout=self.most)
            self.waiting -= 1
