"""MkDocs hook (mkdocs.yml, ``hooks:``): the command reference, written from
the commands themselves when the site is built.

A page holding the line ``<!-- rec --help -->`` gets, in its place, what
``rec --help`` and then ``rec COMMAND --help`` print for each command,
each in a code block: the real defaults and the examples as the terminal
shows them (a table made from the options' attributes showed Click's
``Sentinel.UNSET`` for every default and a function's repr for computed
ones, and ran each command's examples into one paragraph).
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- rec --help -->"
WIDTH = 88  # columns the help is wrapped at: what a wide terminal shows


def reference() -> str:
    """The markdown for every command's ``--help``."""
    import click

    from im2rec.cli import main

    def help_of(command: click.Command, name: str, parent: click.Context | None) -> str:
        ctx = click.Context(command, info_name=name, parent=parent, terminal_width=WIDTH,
                            max_content_width=WIDTH)  # fmt: skip
        return command.get_help(ctx)

    top = click.Context(main, info_name="rec", terminal_width=WIDTH, max_content_width=WIDTH)
    parts = ["## `rec`", "", "```text", "$ rec --help", help_of(main, "rec", None), "```", ""]
    assert isinstance(main, click.Group)
    for name in main.list_commands(top):
        command = main.get_command(top, name)
        if command is None or command.hidden:
            continue
        parts += [f"## `rec {name}`", "", "```text", f"$ rec {name} --help",
                  help_of(command, name, top), "```", ""]  # fmt: skip
    return "\n".join(parts)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: the marker replaced by the reference."""
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
