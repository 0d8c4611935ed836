"""The commands that take records out of a `.rec`, `rec unpack` (files and a
`.lst`) and `rec show` (a contact sheet), and `rec merge`, which puts files
together."""

from __future__ import annotations

import difflib
import json

import click

from ..inspect.merging import merge_recs
from ..inspect.sheets import contact_sheet
from ..inspect.unpacking import unpack_rec
from ..listing.classmap import class_map_beside, read_class_map
from ..storage import is_url
from .common import (
    DASH_REC,
    REC,
    count_text,
    handle_errors,
    make_parent,
    size_text,
    spooled_input,
    to_stdout,
)

__all__ = ["merge_command", "show_command", "unpack_command"]


@click.command("unpack")
@click.argument("rec", type=REC)
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option(
    "--classes",
    type=click.Path(exists=True, dir_okay=False),
    help="A class map: folders by name, not by label [default: PREFIX.classes.tsv from rec "
    "list, if it is beside the .rec].",
)
@click.option("--by-label", is_flag=True, help="Name the folders by label, even with a class map.")
@click.option(
    "--force", "--overwrite", is_flag=True, help="Write into OUT_DIR even if it is not empty."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def unpack_command(
    rec: str, out_dir: str, classes: str | None, by_label: bool, force: bool, as_json: bool
) -> None:
    """Write every image of a .rec back as a file, plus OUT_DIR.lst.

    Images keep their bytes and go to OUT_DIR/CLASS/ID.EXT, CLASS named
    from the class map (the one rec list left beside the .rec, as rec info
    and rec show find it, or --classes), else the label; OUT_DIR.lst, beside
    OUT_DIR, packs them again into the same records: `rec pack OUT_DIR.lst
    --pass-through`.

    \b
    Examples:
      rec unpack train.rec images/
      rec unpack train.rec images/ --classes other.classes.tsv
      rec unpack train.rec images/ --by-label
    """
    if by_label and classes:
        raise click.UsageError("--by-label names the folders by label: drop --classes")
    with handle_errors():
        names = None if by_label else _class_names(rec, classes)
        result = unpack_rec(rec, out_dir, classes=names, force=force)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
        return
    click.echo(
        f"{count_text(result.images, 'image')} written under {result.out}; list: {result.lst}"
    )
    if result.layout_records:
        click.echo(
            f"InsightFace layout: one folder per identity; its {result.layout_records:,} header "
            "and identity records were skipped (rec pack LIST --layout insightface makes them "
            "again)"
        )
    if result.other:
        click.echo(
            f"{result.other:,} payload(s) are not image files: written as .bin, not listed",
            err=True,
        )


@click.command("show")
@click.argument("rec", type=DASH_REC)
@click.option(
    "-o",
    "--output",
    default="sheet.png",
    show_default=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The format follows the suffix; `-` writes a PNG to standard output.",
)
@click.option(
    "-n", "count", default=64, show_default=True, type=click.IntRange(min=1), help="Thumbnails."
)
@click.option(
    "--random",
    "shuffle",
    is_flag=True,
    help="A random sample (see --seed) instead of the first ones.",
)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--label",
    metavar="LABEL",
    help="Only records with this (first) label: a number, or a class name of the class map.",
)
@click.option(
    "--classes",
    type=click.Path(exists=True, dir_okay=False),
    help="Class map for captions by name [default: PREFIX.classes.tsv from rec list, if it "
    "is beside the .rec].",
)
@click.option(
    "--size",
    "thumb",
    default=128,
    show_default=True,
    type=click.IntRange(min=16),
    help="Tile size.",
)
def show_command(
    rec: str,
    output: str,
    count: int,
    shuffle: bool,
    seed: int,
    label: str | None,
    classes: str | None,
    thumb: int,
) -> None:
    """Draw a contact sheet: thumbnails captioned `id: label`, or `id: class`
    when the class map from `rec list` is beside the .rec (or --classes).

    \b
    Examples:
      rec show train.rec -o sheet.png
      rec show train.rec -n 100 --random --label 3
      rec show train.rec --label cat        # a class name from the class map
      rec show train.rec -o - | display     # a PNG on standard output
    """
    with handle_errors():
        names = _class_names(rec, classes)
        value = _label_value(label, names)
    with handle_errors():
        make_parent(output)
    with handle_errors(), spooled_input(rec) as path, to_stdout(output, ".png") as target:
        shown, size = contact_sheet(
            path, target, n=count, shuffle=shuffle, label=value, seed=seed, thumb=thumb,
            classes=names,
        )  # fmt: skip
    where = "standard output" if output == "-" else output
    click.echo(f"{where}: {shown} records, {size[0]}x{size[1]} pixels", err=output == "-")


def _class_names(rec: str, classes: str | None) -> dict[int, str] | None:
    """The class map given, or the one `rec list` left beside the .rec."""
    found = classes or (None if rec == "-" or is_url(rec) else class_map_beside(rec))
    return read_class_map(found) if found else None


def _label_value(label: str | None, names: dict[int, str] | None) -> float | None:
    if label is None:
        return None
    try:
        return float(label)
    except ValueError:
        pass
    by_name = {name: number for number, name in (names or {}).items()}
    if label in by_name:
        return float(by_name[label])
    if names is None:
        raise click.BadParameter(
            f"{label!r} is not a number, and there is no class map to look it up in "
            "(pass --classes PREFIX.classes.tsv)",
            param_hint="--label",
        )
    close = difflib.get_close_matches(label, list(by_name), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise click.BadParameter(
        f"no class named {label!r} in the class map{hint}", param_hint="--label"
    )


@click.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=REC)
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False), help="OUT.rec (and OUT.idx)."
)
@click.option("--renumber", is_flag=True, help="Keys 0..N-1 instead of the inputs' keys.")
@click.option("--overwrite", is_flag=True, help="Replace OUT.rec/OUT.idx if they exist.")
def merge_command(inputs: tuple[str, ...], output: str, renumber: bool, overwrite: bool) -> None:
    """Concatenate .rec files and their indexes into one.

    \b
    Examples:
      rec merge train_0.rec train_1.rec -o train.rec
      rec merge a.rec b.rec -o all.rec --renumber
    """
    with handle_errors():
        make_parent(output)
        records, size = merge_recs(list(inputs), output, renumber=renumber, overwrite=overwrite)
    click.echo(f"{output}: {count_text(records, 'record')}, {size_text(size)}")
