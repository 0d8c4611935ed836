"""Progress bars for the library's long calls, for notebooks and scripts:
``make_lists``, ``pack_list``, the exports and imports, ``verify`` and
the scans that count a mixture's classes take ``progress=True`` and show a
``tqdm.auto`` bar (a widget in Jupyter, text in a terminal), so no caller
writes a callback for one. This is tqdm's one home in im2rec; the command
line draws its own bars with rich, from the same ``on_progress``
callbacks, which the calls still take (both are called when both are
given).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

__all__ = ["progress_bar", "with_progress"]


@contextmanager
def progress_bar(
    progress: bool,
    on_progress: Callable[..., None] | None,
    *,
    desc: str,
    unit: str,
    done: int = 0,
    total: int | None = None,
    scale: bool = False,
) -> Iterator[Callable[..., None] | None]:
    """The callback a long call reports to: ``on_progress`` alone, or with
    ``progress``, one that also moves a ``tqdm.auto`` bar to the count in
    its argument ``done`` (of ``total``, the argument holding the total,
    where one does: 0 there means not known), closed when the block ends.
    ``scale``: the count is bytes, shown as kB, MB..."""
    if not progress:
        yield on_progress
        return
    from tqdm.auto import tqdm

    class Bar(tqdm):  # type: ignore[misc]
        # no monitor thread: it would outlive the bar, and a process with a
        # thread of another's no longer forks its workers (im2rec's pools and
        # DataLoaders start them otherwise, more slowly)
        monitor_interval = 0

    bar = Bar(desc=desc, unit=unit, unit_scale=scale, unit_divisor=1000 if scale else 1)

    def report(*args: Any) -> None:
        if total is not None and args[total] and bar.total != args[total]:
            bar.total = args[total]
        bar.update(args[done] - bar.n)
        if on_progress is not None:
            on_progress(*args)

    try:
        yield report
    finally:
        bar.close()


F = TypeVar("F", bound=Callable[..., Any])


def with_progress(
    desc: str, unit: str, *, done: int = 0, total: int | None = None, scale: bool = False
) -> Callable[[F], F]:
    """Give a long call ``progress=True`` (which its signature declares):
    its ``on_progress`` (whose argument ``done`` counts, and ``total`` holds
    the total) also moves a ``tqdm.auto`` bar, as :func:`progress_bar`."""

    def wrap(call: F) -> F:
        @functools.wraps(call)
        def with_bar(*args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("progress"):
                return call(*args, **kwargs)
            on_progress = kwargs.get("on_progress")
            with progress_bar(True, on_progress, desc=desc, unit=unit, done=done, total=total,
                              scale=scale) as report:  # fmt: skip
                return call(*args, **{**kwargs, "on_progress": report, "progress": False})

        return cast(F, with_bar)

    return wrap
