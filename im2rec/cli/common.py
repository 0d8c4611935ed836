"""What every command shares: the error contract, consoles, progress."""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # rich is imported when output is made, not at start-up
    from rich.console import Console
    from rich.progress import Progress

from ..errors import ConfigError, Im2RecError
from ..storage import is_url
from ..storage.atomic import open_output

__all__ = [
    "DASH_REC",
    "REC",
    "InputPath",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "Terminated",
    "by_sigterm",
    "count_text",
    "err_console",
    "handle_errors",
    "make_parent",
    "maybe_terminal",
    "os_error_text",
    "out_console",
    "progress_bar",
    "progress_counter",
    "sigterm_as_interrupt",
    "size_text",
    "spooled_input",
    "to_stdout",
]


class InputPath(click.Path):
    """A local file that must exist, or a URL (checked when it is opened:
    asking the store twice costs a request)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..storage import is_url

        if isinstance(value, str) and is_url(value):
            return value
        return super().convert(value, param, ctx)


#: A .rec argument: a path, a URL, or ``-`` (standard input).
DASH_REC = InputPath(exists=True, dir_okay=False, allow_dash=True)
#: A .rec argument: a path or a URL.
REC = InputPath(exists=True, dir_okay=False)
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process it killed
FC = TypeVar("FC", bound=Callable[..., Any])


def out_console() -> Console:
    """Results go to stdout (so they can be piped)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def err_console() -> Console:
    """Warnings and progress go to stderr."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def print_property(console: Console, where: str | None, note: str | None) -> None:
    """The InsightFace layout's ``property`` file: where it went, or why not."""
    from rich.markup import escape

    if where is not None:
        console.print(f"  InsightFace property file (classes,height,width): {escape(where)}")
    elif note is not None:
        console.print(f"  [yellow]property not written[/]: {escape(note)}")


def maybe_terminal(stream: Any) -> bool:
    """False when rich could not call ``stream`` a terminal: checked without
    importing rich, so piped and scripted runs start faster."""
    if os.environ.get("TTY_COMPATIBLE") or "FORCE_COLOR" in os.environ:
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def num_workers_option(default: Any, help: str, show_default: Any = True) -> Callable[[FC], FC]:
    """``--num-workers N`` with im2rec.py's and GluonCV's ``--num-thread`` alias."""

    def bounded(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
        from ..executors.worker import check_workers

        if value is not None:
            try:
                check_workers(value, "--num-workers")
            except ConfigError as exc:
                said = str(exc).removeprefix("--num-workers ")  # (click names the option)
                raise click.BadParameter(said, ctx, param) from None
        return value

    return click.option(
        "--num-workers", "--num-thread", "num_workers", type=click.IntRange(min=1),
        default=default, show_default=show_default, help=help, callback=bounded,
    )  # fmt: skip


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch scheduler's stop, ``kill``), raised where Ctrl-C
    would be, so every command stops the same way: workers asked to stop,
    partial outputs removed or kept for ``--resume``, one line said."""


def _raise_terminated(_signum: int, _frame: object) -> None:
    raise Terminated


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (signal
    handlers can only be set from the main thread; elsewhere, nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def by_sigterm(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised while handling, a SIGTERM."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, Terminated):
        seen = seen.__cause__ or seen.__context__
    return seen is not None


@contextmanager
def handle_errors(*, writes: bool = True) -> Iterator[None]:
    """Library errors become one ``Error: ...`` line: option mistakes exit 2
    (like Click's own usage errors), everything else 1; Ctrl-C exits 130,
    SIGTERM (handled the same way) 143. ``writes=False`` for commands that
    only read, so an interruption does not speak of partial outputs."""
    try:
        with sigterm_as_interrupt():
            yield
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    except Im2RecError as exc:
        error = click.ClickException(str(exc))
        code = getattr(exc, "exit_code", 1)  # 130: interrupted
        if code == EXIT_INTERRUPTED and by_sigterm(exc):
            code = EXIT_TERMINATED
        error.exit_code = code  # type: ignore[misc]
        raise error from exc
    except KeyboardInterrupt as exc:
        what = "Terminated (SIGTERM)" if isinstance(exc, Terminated) else "Interrupted"
        done = "partial outputs were removed" if writes else "nothing was written"
        click.echo(f"{what}; {done}.", err=True)
        sys.exit(EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED)
    except OSError as exc:  # the file system said no: a folder missing, no permission, ...
        raise click.ClickException(os_error_text(exc)) from exc


_REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS)
_TEMP_NAME = re.compile(r"^\.(.+)\.\d+\.tmp$")  # atomic writes' ".NAME.PID.tmp"


def os_error_text(exc: OSError) -> str:
    """One line for an ``OSError``, naming the file the user asked for (not
    the temporary one an atomic write goes through) and what to do."""
    if exc.filename is None:
        return exc.strerror or str(exc)
    path = os.fsdecode(exc.filename)
    head, tail = os.path.split(path)
    temp = _TEMP_NAME.match(tail)
    if temp:
        path = os.path.join(head, temp.group(1))
    if exc.errno == errno.ENOENT and head and not os.path.isdir(head):
        return f"{path}: the folder {head} does not exist; create it first"
    if exc.errno in _REFUSED and head and os.path.isdir(head) and not os.access(head, os.W_OK):
        return (
            f"cannot write {path}: the folder {head} is not writable ({exc.strerror}); "
            "write somewhere else, or fix the folder's permissions"
        )
    hint = {errno.EACCES: "; check its permissions", errno.ENOSPC: "; free some space"}
    return f"{path}: {exc.strerror}{hint.get(exc.errno or 0, '')}"


@contextmanager
def progress_counter(
    describe: Callable[[int, int], str], *, quiet: bool = False
) -> Iterator[Callable[[int, int], None]]:
    """A live one-line counter on stderr, e.g. "12,345 images in 678 folders".

    Silent when stderr is not a terminal or with ``quiet``; yields the
    callback the library calls with its two counts.
    """
    console = None if quiet or not maybe_terminal(sys.stderr) else err_console()
    if console is None or not console.is_terminal:
        yield lambda _a, _b: None
        return
    with console.status(describe(0, 0)) as status:
        yield lambda a, b: status.update(describe(a, b))


class _Bar:
    """One rich progress bar per task; ``track(...)`` returns the callback
    the library calls with ``(done, total, bytes)``."""

    def __init__(self, progress: Progress | None):
        self.progress = progress

    def track(
        self, description: str, total: int, done: int = 0, unit: str = "images"
    ) -> Callable[[int, int, int], None]:
        """A bar counting ``unit`` (``images``, ``records``; ``bytes``: done
        and total are bytes, shown as sizes). Rates count from the first
        call, so work done before (a resumed pack's) is not in them."""
        progress = self.progress
        if progress is None:
            return lambda _d, _t, _b: None
        task = progress.add_task(description, total=total or None, completed=done, rate="",
                                 count="")  # fmt: skip
        since: list[float] = []  # (time, done, bytes) of the first call

        def update(done: int, total: int, nbytes: int) -> None:
            now = time.perf_counter()
            if not since:
                since.extend((now, done, nbytes))
            elapsed = now - since[0]
            if unit == "bytes":
                count = f"{size_text(done)}/{size_text(total)}" if total else size_text(done)
                rate = f"{(done - since[1]) / elapsed / 1e6:,.1f} MB/s" if elapsed > 0 else ""
            else:
                count = f"{done:,}/{total:,}" if total else f"{done:,}"
                rate = (
                    f"{(done - since[1]) / elapsed:,.0f} {unit}/s  "
                    f"{(nbytes - since[2]) / elapsed / 1e6:,.1f} MB/s"
                    if elapsed > 0
                    else ""
                )
            progress.update(task, completed=done, total=total or None, count=count, rate=rate)

        return update


@contextmanager
def progress_bar(*, quiet: bool = False) -> Iterator[_Bar]:
    """Progress bars (the count, its rate, MB/s, ETA) on stderr when it is a
    terminal."""
    console = None if quiet or not maybe_terminal(sys.stderr) else err_console()
    if console is None or not console.is_terminal:
        yield _Bar(None)
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        yield _Bar(progress)


@contextmanager
def spooled_input(path: str, suffix: str = ".rec") -> Iterator[str]:
    """``path`` itself, or for ``-`` a temporary file holding standard input:
    the readers need random access, so a piped ``.rec`` is copied to
    ``$TMPDIR`` first (and removed after)."""
    if path != "-":
        yield path
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="im2rec-stdin-") as tmp:
        target = os.path.join(tmp, f"stdin{suffix}")
        with open_output(target, binary=True) as f:
            shutil.copyfileobj(sys.stdin.buffer, f, 1 << 22)
        yield target


@contextmanager
def to_stdout(path: str, suffix: str) -> Iterator[str]:
    """``path`` itself, or for ``-`` a temporary file that is copied to
    standard output when the block succeeds (``rec show -o -``)."""
    if path != "-":
        yield path
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="im2rec-stdout-") as tmp:
        target = os.path.join(tmp, f"out{suffix}")
        yield target
        with open(target, "rb") as f:
            sys.stdout.flush()
            shutil.copyfileobj(f, sys.stdout.buffer)
            sys.stdout.buffer.flush()


def size_text(size: int) -> str:
    """A size as people read it: ``580 bytes``, ``13.5 kB``, ``95.9 MB``,
    ``1.2 GB`` (decimal units, one decimal; never ``0.0 MB``)."""
    if size < 1000:
        return "1 byte" if size == 1 else f"{size:,} bytes"
    value = float(size)
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if value < 999.95 or unit == "TB":
            return f"{value:,.1f} {unit}"
    raise AssertionError("unreachable")


def count_text(n: int, noun: str, plural: str | None = None) -> str:
    """``1 record``, ``12 records``, ``1,500 images``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def make_parent(output: str) -> None:
    """Create the folder an output goes into, as every command that writes
    does (`rec export -o new/x-%06d.tar`, `rec import -o new/x`, `rec
    merge`, `rec convert`, `rec index -o`, `rec show -o`, `rec list -o`):
    one rule, instead of some commands saying "create it first". Not for
    standard output (`-`) or a store's URL (a prefix needs no folder)."""
    if output == "-" or is_url(output):
        return
    parent = os.path.dirname(output)
    if parent:
        os.makedirs(parent, exist_ok=True)
