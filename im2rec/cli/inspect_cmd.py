"""``rec index``, ``rec verify`` and ``rec info``: looking inside a ``.rec``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..inspection import rebuild_index, summarise, verify
from ..recordio.index import format_index_line
from .common import DASH_REC, err_console, handle_errors, out_console, progress_bar, spooled_input

__all__ = ["index_command", "info_command", "verify_command"]

REC = DASH_REC  # `-`: the .rec comes on standard input


@click.command("index")
@click.argument("rec", type=REC)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="[default: REC with .idx; `-`: standard output]",
)
@click.option(
    "--keys",
    type=click.Choice(["seq", "id"]),
    default="seq",
    show_default=True,
    help="seq: 0..N-1 like rec2idx.py; id: each record's header id, as im2rec.py writes.",
)
@click.option(
    "--recover", is_flag=True, help="Skip damaged stretches and index the records around them."
)
def index_command(rec: str, output: str | None, keys: str, recover: bool) -> None:
    """Rebuild the .idx of a .rec by walking its records.

    \b
    Examples:
      rec index train.rec                 # train.idx, keys 0..N-1
      rec index train.rec --keys id       # keys = header ids, as im2rec.py
      rec index damaged.rec --recover -o damaged.idx
      cat train.rec | rec index - -o -   # from standard input to standard output
    """
    if rec == "-" and not output:
        raise click.UsageError("a .rec read from standard input needs -o (a file, or - for stdout)")
    target = Path(output) if output else Path(rec).with_suffix(".idx")
    with handle_errors(), spooled_input(rec) as path:
        index, damages = rebuild_index(path, keys="id" if keys == "id" else "seq", recover=recover)
        if output == "-":
            lines = map(format_index_line, index.key_list(), index.offsets.tolist())
            click.echo("".join(lines), nl=False)
        else:
            index.save(target)  # atomic
    for d in damages:
        err_console().print(f"skipped bytes {d.offset:,} to {d.end:,}: {d.reason}", markup=False)
    click.echo(
        f"{'standard output' if output == '-' else target}: {len(index):,} records indexed"
        + (f", {len(damages)} damaged stretch(es) skipped" if damages else ""),
        err=output == "-",
    )


@click.command("verify")
@click.argument("rec", type=REC)
@click.option(
    "--idx",
    type=click.Path(exists=True, dir_okay=False),
    help="[default: REC with .idx, if present]",
)
@click.option("--decode", is_flag=True, help="Also decode every image.")
@click.option(
    "--manifest",
    type=click.Path(exists=True, dir_okay=False),
    help="A pack manifest (NAME.pack.json) whose SHA-256s must match.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def verify_command(
    rec: str, idx: str | None, decode: bool, manifest: str | None, as_json: bool
) -> None:
    """Check a .rec: every frame, its .idx, optionally its images and manifest.

    Exits 0 only when everything holds; each problem is reported with its
    byte offset (and key when known).

    \b
    Examples:
      rec verify train.rec
      rec verify train.rec --decode --manifest train.pack.json --json
    """
    with (
        handle_errors(writes=False),
        spooled_input(rec) as path,
        progress_bar(quiet=as_json) as bar,
    ):
        track = bar.track(Path(rec).name, total=Path(path).stat().st_size)
        result = verify(path, idx, decode=decode, manifest=manifest,
                        on_progress=lambda done, total: track(done, total, done))  # fmt: skip
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    else:
        for p in result.problems:  # click, not rich: verify is often run from scripts
            where = f"byte {p.offset:,}" if p.offset is not None else "file"
            key = f", key {p.key}" if p.key is not None else ""
            click.echo(f"{click.style('problem', fg='red')} at {where}{key}: {p.message}")
        status = "OK" if result.ok else f"{len(result.problems)} problem(s)"
        click.echo(f"{result.path}: {result.records:,} records, {result.bytes:,} bytes: {status}")
    if not result.ok:
        raise SystemExit(1)


@click.command("info")
@click.argument("rec", type=REC)
@click.option("--full", is_flag=True, help="Open every image, not a sample of 200.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
def info_command(rec: str, full: bool, as_json: bool) -> None:
    """Summarise a .rec: records, labels, ids, image formats and sizes, index.

    \b
    Examples:
      rec info train.rec
      rec info train.rec --full --json
    """
    with handle_errors(writes=False), spooled_input(rec) as path:
        info = summarise(path, sample=None if full else 200)
    if as_json:
        click.echo(json.dumps(info, indent=1))
        return
    console = out_console()
    if not console.is_terminal:
        for key, value in info.items():
            click.echo(f"{key:>15}: {value}")
        return
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    for key, value in info.items():
        table.add_row(f"[bold]{key}[/]", str(value))
    console.print(table)
