"""Write several output files so that they appear together or not at all.

Each output is written under a hidden temporary name beside its target; the
group renames them all into place only when its ``with`` block succeeds. On
an exception (including Ctrl-C) the temporary files are removed and existing
outputs stay as they were.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

__all__ = ["AtomicGroup"]


class AtomicGroup:
    """``with AtomicGroup() as group: group.write_text(path, text)``."""

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []

    def temp_path(self, target: str | os.PathLike[str]) -> Path:
        """A temporary path to write ``target``'s content to; it is moved
        into place when the group commits."""
        final = Path(target)
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        self._pending.append((tmp, final))
        return tmp

    def write_text(self, target: str | os.PathLike[str], text: str) -> None:
        tmp = self.temp_path(target)
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    def commit(self) -> None:
        for tmp, final in self._pending:
            os.replace(tmp, final)
        self._pending.clear()

    def discard(self) -> None:
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        self._pending.clear()

    def __enter__(self) -> AtomicGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()
