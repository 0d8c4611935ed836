"""What every command shares: the error contract, consoles, progress."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.console import Console

from ..errors import ConfigError, Im2RecError

__all__ = ["EXIT_INTERRUPTED", "err_console", "handle_errors", "out_console", "progress_counter"]

EXIT_INTERRUPTED = 130


def out_console() -> Console:
    """Results go to stdout (so they can be piped)."""
    return Console(highlight=False, soft_wrap=True)


def err_console() -> Console:
    """Warnings and progress go to stderr."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


@contextmanager
def handle_errors() -> Iterator[None]:
    """Library errors become one ``Error: ...`` line: option mistakes exit 2
    (like Click's own usage errors), everything else 1; Ctrl-C exits 130."""
    try:
        yield
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    except Im2RecError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        click.echo("Interrupted; partial outputs were removed.", err=True)
        sys.exit(EXIT_INTERRUPTED)


@contextmanager
def progress_counter(
    describe: Callable[[int, int], str], *, quiet: bool = False
) -> Iterator[Callable[[int, int], None]]:
    """A live one-line counter on stderr, e.g. "12,345 images in 678 folders".

    Silent when stderr is not a terminal or with ``quiet``; yields the
    callback the library calls with its two counts.
    """
    console = err_console()
    if quiet or not console.is_terminal:
        yield lambda _a, _b: None
        return
    with console.status(describe(0, 0)) as status:
        yield lambda a, b: status.update(describe(a, b))
