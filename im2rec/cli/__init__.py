"""The ``rec`` command line: a thin Click layer over the library.

Exit codes (documented in the README): 0 success; 1 a run-time failure (an
:class:`~im2rec.errors.Im2RecError`, printed as one ``Error: ...`` line);
2 a usage mistake (Click); 130 interrupted with Ctrl-C; 143 stopped by
SIGTERM (handled like Ctrl-C).
"""

from __future__ import annotations

import difflib
import importlib
import sys

import click

from ..errors import ConfigError
from ..version import __version__
from .common import EXIT_INTERRUPTED, handle_errors

__all__ = ["EXIT_INTERRUPTED", "handle_errors", "main", "version_text"]


def version_text() -> str:
    from ..imaging.codec import backend_info

    info = backend_info()
    turbo = info["libjpeg_turbo"]
    jpeg = f"libjpeg-turbo {turbo}" if turbo else "libjpeg (not turbo)"
    region = info["region_decoder"]
    crops = f"JPEG regions: libjpeg-turbo {region}" if region else "JPEG regions: Pillow"
    py = ".".join(map(str, sys.version_info[:3]))
    missing = info["missing"]
    codecs = (
        "image codecs: all of Pillow's wheel's"
        if not missing
        else "image codecs: without " + ", ".join(f"{k} ({v})" for k, v in missing.items())
    )
    return (
        f"rec (im2rec) {__version__}\n{info['backend']} {info['version']}, {jpeg}; {crops}; "
        f"Python {py}\n{codecs}\n{native_text()}"
    )


def native_text() -> str:
    """One line: each C extension, whether it is in use, and its library."""
    from .. import native

    if native.switched_off():
        return "native extensions: all off (IM2REC_NO_NATIVE=1)"
    try:
        native.simd_cap()
    except ConfigError as exc:
        return f"native extensions: {exc}"
    parts = []
    for ext in native.extensions():
        library = f" ({ext.library})" if ext.library else ""
        parts.append(f"{ext.name} {ext.state}{library}")
    return "native extensions: " + ", ".join(parts)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


#: command name -> "module:attribute"; imported only when that command runs,
#: so `rec verify` does not pay for Pillow and the process pool.
COMMANDS = {
    "browse": ".browse_cmd:browse_command",
    "export": ".formats_cmd:export_command",
    "imagenet": ".imagenet_cmd:imagenet_command",
    "import": ".formats_cmd:import_command",
    "index": ".inspect_cmd:index_command",
    "info": ".inspect_cmd:info_command",
    "list": ".list_cmd:list_command",
    "convert": ".formats_cmd:convert_command",
    "merge": ".records_cmd:merge_command",
    "pack": ".pack_cmd:pack_command",
    "show": ".records_cmd:show_command",
    "unpack": ".records_cmd:unpack_command",
    "verify": ".inspect_cmd:verify_command",
}


def _owners_of(option: str, command: str | None) -> list[str]:
    """The other commands that take ``option``."""
    owners = []
    for name in sorted(COMMANDS):
        if name == command:
            continue
        module, attr = COMMANDS[name].split(":")
        other = getattr(importlib.import_module(module, __package__), attr)
        if any(option in p.opts or option in p.secondary_opts for p in other.params):
            owners.append(name)
    return owners


#: what to say of an option a command does not take, where that is not
#: only whose option it is
_INSTEAD = {
    ("pack", "-o"): "rec pack writes each .rec beside its list (NAME.lst -> NAME.rec and "
    "NAME.idx); to choose the name, name the list: `rec list ROOT -o NAME`",
    ("pack", "--output"): "rec pack writes each .rec beside its list (NAME.lst -> NAME.rec "
    "and NAME.idx); to choose the name, name the list: `rec list ROOT -o NAME`",
}


def _whose(option: str, command: str | None) -> str | None:
    """What to say of ``option`` given to ``command``, which does not take
    it, or None when no other command takes it either."""
    instead = _INSTEAD.get((command or "", option))
    owners = _owners_of(option, command)
    if instead is not None:
        return instead
    if not owners:
        return None
    if len(owners) == 1:
        said = f"it is an option of `rec {owners[0]}`"
    else:
        said = f"it is an option of {', '.join(f'`rec {o}`' for o in owners)}"
    if {command, *owners} <= {"list", "pack"}:  # (im2rec.py's one command line, split in two)
        said += " (im2rec.py took listing and packing options in one command line)"
    return said


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

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """`rec` alone shows the help and exits 0 (Click's default is a usage
        error, exit 2: a newcomer's first try looked like a failure)."""
        if not args:
            click.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """One line a command, its whole first sentence (Click cuts them at
        the terminal's width with "..."; long ones wrap instead)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=200)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command names the closest ones (`rec lst`: did you
        mean list?)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=2, cutoff=0.5)
            ctx.fail(f"No such command {name!r}.{_did_you_mean(close)}")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        """An unknown option says whose it is (another command's), or names
        the closest of this command's, in the words of an unknown command."""
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            command = exc.ctx.info_name if exc.ctx else None
            said = f"No such option {exc.option_name!r} for `rec {command}`"
            whose = _whose(exc.option_name, command)
            if whose:
                raise click.UsageError(f"{said}: {whose}", ctx=exc.ctx) from exc
            close = _closest_options(exc.option_name, exc.ctx.command) if exc.ctx else []
            raise click.UsageError(f"{said}.{_did_you_mean(close)}", ctx=exc.ctx) from exc


def _did_you_mean(names: list[str]) -> str:
    return f" Did you mean {' or '.join(repr(n) for n in names)}?" if names else ""


def _closest_options(option: str, command: click.Command) -> list[str]:
    """The options of ``command`` that ``option`` most likely meant: those
    whose help speaks of its word (``--images``: ``--decode``, "decode
    every image"), else those spelled most alike."""
    import re

    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    names = [name for p in options for name in p.opts if name.startswith("--")]
    alike = difflib.get_close_matches(option, names, n=2, cutoff=0.75)  # a typo
    if alike:
        return alike
    word = option.lstrip("-").lower()
    stem = word[:-1] if word.endswith("s") else word
    spoken = re.compile(rf"(?<![-\w]){re.escape(stem)}s?\b")  # a word, not an option's name
    by_help = [p.opts[0] for p in options if p.help and spoken.search(p.help.lower())]
    return by_help[:2] or difflib.get_close_matches(option, names, n=2, cutoff=0.6)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    "-V",
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
