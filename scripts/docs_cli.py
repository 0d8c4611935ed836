"""docs/cli.md's command reference, written from the commands themselves
and committed, so a change to a command's help shows in review (as
sqlite-utils does with cog):

    .venv/bin/python scripts/docs_cli.py           # write the reference
    .venv/bin/python scripts/docs_cli.py --check   # exit 1 if it differs (make lint)

Between ``<!-- rec --help -->`` and ``<!-- /rec --help -->`` goes what
``rec --help`` and then ``rec COMMAND --help`` print for each command, and
between ``<!-- im2rec --help -->`` and its end what ``im2rec --help``
prints, each in a code block: the real defaults and the examples as the
terminal shows them, wrapped to :data:`WIDTH` columns, what the site's
code box shows without cutting a line.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
#: the columns the help is wrapped at: what the site's code box holds
WIDTH = 79


def rec_reference() -> str:
    """The markdown for ``rec --help`` and every command's ``--help``."""
    import click

    from im2rec.cli import main

    def help_of(command: click.Command, name: str, parent: click.Context | None) -> str:
        ctx = click.Context(command, info_name=name, parent=parent, terminal_width=WIDTH,
                            max_content_width=WIDTH, **main.context_settings)  # fmt: skip
        return command.get_help(ctx)

    top = click.Context(main, info_name="rec", terminal_width=WIDTH, max_content_width=WIDTH,
                        **main.context_settings)  # fmt: skip
    parts = ["## `rec`", "", "```text", "$ rec --help", help_of(main, "rec", None), "```", ""]
    assert isinstance(main, click.Group)
    for name in main.list_commands(top):
        command = main.get_command(top, name)
        if command is None or command.hidden:
            continue
        parts += [f"## `rec {name}`", "", "```text", f"$ rec {name} --help",
                  help_of(command, name, top), "```", ""]  # fmt: skip
    return "\n".join(parts)


def im2rec_reference() -> str:
    """``im2rec --help`` (argparse, as im2rec.py's), in a code block."""
    from im2rec.cli.im2rec_compat import _parser

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH + 1)  # argparse wraps to the terminal, less 2
    try:
        text = _parser().format_help()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    return f"```text\n{text}```\n"


def page(text: str) -> str:
    """``text`` (docs/cli.md) with its generated parts written anew."""
    for marker, made in (("rec --help", rec_reference), ("im2rec --help", im2rec_reference)):
        block = re.compile(
            rf"(<!-- {re.escape(marker)} -->\n).*?(<!-- /{re.escape(marker)} -->)", re.S
        )
        if not block.search(text):
            raise SystemExit(f"{PAGE}: no <!-- {marker} --> ... <!-- /{marker} --> block")
        generated = made()
        text = block.sub(lambda m: m.group(1) + generated + "\n" + m.group(2), text)
    return text


def main() -> int:
    text = PAGE.read_text(encoding="utf-8")
    made = page(text)
    wide = [line for line in made.splitlines() if len(line) > WIDTH and not line.startswith("<!--")]
    if wide:
        print(f"{PAGE}: {len(wide)} lines wider than {WIDTH} columns, e.g. {wide[0]!r}")
        return 1
    if "--check" in sys.argv[1:]:
        if made != text:
            print(f"{PAGE} is not what the commands' --help say: run "
                  "`.venv/bin/python scripts/docs_cli.py` and commit it")  # fmt: skip
            return 1
        return 0
    PAGE.write_text(made, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
