"""The ``rec`` command line: a thin Click layer over the library.

Exit codes (documented in the README): 0 success; 1 a run-time failure (an
:class:`~im2rec.errors.Im2RecError`, printed as one ``Error: ...`` line);
2 a usage mistake (Click); 130 interrupted with Ctrl-C.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from .common import EXIT_INTERRUPTED, handle_errors
from .inspect_cmd import index_command, info_command, verify_command
from .list_cmd import list_command
from .pack_cmd import pack_command

__all__ = ["EXIT_INTERRUPTED", "handle_errors", "main", "version_text"]


def version_text() -> str:
    from ..imaging import backend_info

    info = backend_info()
    turbo = info["libjpeg_turbo"]
    jpeg = f"libjpeg-turbo {turbo}" if turbo else "libjpeg (not turbo)"
    py = ".".join(map(str, sys.version_info[:3]))
    return f"rec (im2rec) {__version__}\n{info['backend']} {info['version']}, {jpeg}; Python {py}"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and the imaging backend, then exit.",
)
def main() -> None:
    """Work with MXNet RecordIO (.lst/.rec/.idx) image datasets, without MXNet.

    \b
    Examples:
      rec list ./example --recursive      # folders -> example.lst
      rec pack --pass-through --num-workers 8   # example.lst -> example.rec/.idx
      rec --version
    """


main.add_command(list_command)
main.add_command(pack_command)
main.add_command(index_command)
main.add_command(verify_command)
main.add_command(info_command)
