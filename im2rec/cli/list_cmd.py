"""``rec list``: image folders to ``.lst`` files."""

from __future__ import annotations

import json
import os
import re

import click
from rich.table import Table

from ..errors import ConfigError
from ..listing.lstfile import printable
from ..listing.making import DEFAULT_EXTS, IM2REC_SEED, ListOptions, ListResult, make_lists
from ..storage import is_url
from .common import InputPath, err_console, handle_errors, out_console, progress_counter

__all__ = ["list_command"]

_SHOW_CLASSES = 12  # a one-screen summary lists the classes up to this many


def _split_exts(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    found = tuple(e for value in values for e in re.split(r"[,\s]+", value) if e)
    return found or DEFAULT_EXTS


@click.command("list")
@click.argument("root", type=InputPath(exists=True, file_okay=False))
@click.option(
    "-o",
    "--output",
    "prefix",
    metavar="PREFIX",
    help="Output prefix: writes PREFIX.lst (or PREFIX_train.lst ...). "
    "[default: the ROOT folder's name, in the current folder]",
)
@click.option(
    "--recursive", is_flag=True, help="Walk subfolders; every folder with images becomes a class."
)
@click.option(
    "--exts",
    multiple=True,
    callback=_split_exts,
    metavar="EXT[,EXT...]",
    help="Image extensions, case-insensitive; repeat or separate with commas. "
    "[default: .jpeg,.jpg,.png]",
)
@click.option(
    "--chunks",
    type=int,
    default=1,
    show_default=True,
    help="Split the list into this many chunks (PREFIX_0.lst ...).",
)
@click.option(
    "--train-ratio",
    type=float,
    default=1.0,
    show_default=True,
    help="Fraction of each chunk for PREFIX_train.lst.",
)
@click.option(
    "--test-ratio",
    type=float,
    default=0.0,
    show_default=True,
    help="Fraction of each chunk for PREFIX_test.lst; the rest goes to PREFIX_val.lst.",
)
@click.option(
    "--shuffle/--no-shuffle",
    default=True,
    show_default=True,
    help="Shuffle before chunking and splitting.",
)
@click.option(
    "--seed",
    type=int,
    default=IM2REC_SEED,
    show_default=True,
    help="Shuffle seed; the default gives im2rec.py's order.",
)
@click.option(
    "--follow-links/--no-follow-links",
    default=True,
    show_default=True,
    help="Enter symlinked folders (linked files are always listed).",
)
@click.option(
    "--stratify",
    is_flag=True,
    help="Split train/val/test within each class, keeping class proportions.",
)
@click.option(
    "--min-per-class",
    type=int,
    default=0,
    show_default=True,
    help="Drop classes with fewer images; labels are renumbered 0..K-1.",
)
@click.option("--strict", is_flag=True, help="Fail (and write nothing) if any file is skipped.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display and no summary.")
def list_command(
    root: str,
    prefix: str | None,
    recursive: bool,
    exts: tuple[str, ...],
    chunks: int,
    train_ratio: float,
    test_ratio: float,
    shuffle: bool,
    seed: int,
    follow_links: bool,
    stratify: bool,
    min_per_class: int,
    strict: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """List the images under ROOT into .lst files, as im2rec.py --list does.

    Each line is `index<TAB>label<TAB>path`. With --recursive every folder
    holding images is a class, labelled in sorted walk order; the class map
    is saved as PREFIX.classes.tsv (`label<TAB>folder`) and the run as
    PREFIX.lists.json (root, options, counts). For the same folder and options
    the entries equal im2rec.py's; outputs appear only when the run succeeds.

    \b
    Examples:
      rec list ./example --recursive
      rec list ./data --recursive --train-ratio 0.8 --test-ratio 0.1 --stratify
      rec list ./images -o lists/train --chunks 4 --exts .jpg,.webp --json
    """
    with handle_errors():
        options = ListOptions(
            recursive=recursive, exts=exts, chunks=chunks, train_ratio=train_ratio,
            test_ratio=test_ratio, shuffle=shuffle, seed=seed, follow_links=follow_links,
            stratify=stratify, min_per_class=min_per_class,
        )  # fmt: skip
        out = prefix if prefix is not None else _default_prefix(root)
        with progress_counter(_describe, quiet=quiet or as_json) as on_progress:
            result = make_lists(root, out, options, strict=strict, on_progress=on_progress)
    _report_skipped(result)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    elif not quiet:
        _print_summary(result)


def _default_prefix(root: str) -> str:
    name = (
        root.rstrip("/").rsplit("/", 1)[-1]
        if is_url(root)
        else os.path.basename(os.path.abspath(root))
    )
    if not name:
        raise ConfigError(f"cannot name the output after {root!r}; pass -o PREFIX")
    return name


def _describe(folders: int, images: int) -> str:
    return f"Scanning: {images:,} images in {folders:,} folders"


def _report_skipped(result: ListResult) -> None:
    if not result.scan.skipped:
        return
    console = err_console()
    for reason, paths in result.scan.skipped.items():
        examples = ", ".join(printable(p) for p in paths[:3])
        more = f" and {len(paths) - 3:,} more" if len(paths) > 3 else ""
        console.print(
            f"[yellow]Skipped {len(paths):,} file(s): {reason}[/]: {examples}{more}",
            markup=True,
        )
    console.print(f"All skipped files are listed in {result.skipped_report}")


def _print_summary(result: ListResult) -> None:
    scan = result.scan
    console = out_console()
    console.print(
        f"Listed [bold]{len(scan.entries):,}[/] images in [bold]{len(scan.classes):,}[/] "
        f"{'class' if len(scan.classes) == 1 else 'classes'} from "
        f"{scan.root if is_url(scan.root) else os.path.abspath(scan.root)}"
    )
    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("list")
    table.add_column("images", justify="right")
    for path, n in result.lists:
        table.add_row(path, f"{n:,}")
    console.print(table)
    counts = [c["images"] for c in result.to_dict()["classes"]]
    if len(counts) <= _SHOW_CLASSES:
        shown = ", ".join(
            f"{label} {scan.classes[label]} ({n:,})" for label, n in enumerate(counts)
        )
        console.print(f"Classes: {shown}", markup=False)
    else:
        console.print(f"Classes: {min(counts):,} to {max(counts):,} images each")
    console.print(f"Class map: {result.class_map}; run record: {result.manifest}", markup=False)
