"""The ``rec`` command line: a thin Click layer over the library.

Exit codes (documented in the README): 0 success; 1 a run-time failure (an
:class:`~im2rec.errors.Im2RecError`, printed as one ``Error: ...`` line);
2 a usage mistake (Click); 130 interrupted with Ctrl-C; 143 stopped by
SIGTERM (handled like Ctrl-C).
"""

from __future__ import annotations

import importlib
import sys

import click

from .. import __version__
from .common import EXIT_INTERRUPTED, handle_errors

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


#: command name -> "module:attribute"; imported only when that command runs,
#: so `rec verify` does not pay for Pillow and the process pool.
COMMANDS = {
    "imagenet": ".imagenet_cmd:imagenet_command",
    "index": ".inspect_cmd:index_command",
    "info": ".inspect_cmd:info_command",
    "list": ".list_cmd:list_command",
    "merge": ".convert_cmd:merge_command",
    "pack": ".pack_cmd:pack_command",
    "show": ".convert_cmd:show_command",
    "unpack": ".convert_cmd:unpack_command",
    "verify": ".inspect_cmd:verify_command",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS:
            module, attr = COMMANDS[cmd_name].split(":")
            command = getattr(importlib.import_module(module, __package__), attr)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
