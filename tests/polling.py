"""Waiting for something another thread or the kernel does: checked
every 20 ms until it holds or the time is up (tests poll, never sleep a
guessed time)."""

from __future__ import annotations

import time
from collections.abc import Callable


def poll(check: Callable[[], object], seconds: float = 10.0) -> bool:
    """Whether ``check()`` came true within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return bool(check())
