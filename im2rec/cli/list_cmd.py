"""``rec list``: image folders to ``.lst`` files."""

from __future__ import annotations

import json
import os
import re
from typing import cast

import click
from rich.table import Table

from ..errors import ConfigError
from ..listing.classmap import read_class_order
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
@click.option(
    "--boxes",
    type=click.Choice(["voc", "coco", "yolo"]),
    help="ROOT is an annotation set: a VOC20xx folder, COCO images (with --annotations) or a "
    "YOLO folder (images/, labels/). Writes detection lists (docs/detection.md).",
)
@click.option(
    "--image-set",
    metavar="NAME",
    help="VOC: list the ids of ImageSets/Main/NAME.txt. [default: every annotation]",
)
@click.option(
    "--annotations",
    type=click.Path(exists=True, dir_okay=False),
    help="COCO: the instances_*.json whose images are in ROOT.",
)
@click.option(
    "--classes",
    "classes_file",
    type=click.Path(exists=True, dir_okay=False),
    help="The class order: a class map (PREFIX.classes.tsv, to list a split as its sibling "
    "was) or names one a line. [default: folders in walk order; with --boxes: VOC names "
    "sorted, COCO categories by id, YOLO's classes.txt]",
)
@click.option(
    "--splits/--no-splits",
    default=True,
    show_default=True,
    help="With --recursive: a ROOT whose folders are train/, val/, test/ (training, valid, "
    "validation, dev, testing) is listed a split at a time, PREFIX_train.lst and so on, "
    "with one class map for all; --no-splits lists it as one tree.",
)
@click.option(
    "--keep-empty",
    is_flag=True,
    help="With --boxes: list images with no object too (MXNet's detection iterator refuses them).",
)
@click.option(
    "--crowd",
    type=click.Choice(["flag", "skip"]),
    default="flag",
    show_default=True,
    help="COCO: keep iscrowd boxes with their flag (the object's sixth value) set, or skip them.",
)
@click.option(
    "--convention",
    type=click.Choice(["im2rec", "gluoncv"]),
    default="im2rec",
    show_default=True,
    help="With --boxes: gluoncv reads VOC and COCO boxes as GluonCV's readers do where they "
    "differ (COCO: x + w - 1 clipped to width - 1, zero-area and ignore boxes left out, images "
    "by id; VOC: names lower-cased, bad boxes left out, not refused). See docs/detection.md.",
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
    boxes: str | None,
    image_set: str | None,
    annotations: str | None,
    classes_file: str | None,
    splits: bool,
    keep_empty: bool,
    crowd: str,
    convention: str,
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

    With --boxes, ROOT is an annotation set (Pascal VOC, COCO or YOLO) and
    each line's label is a detection label, `4 6 width height` then
    `class xmin ymin xmax ymax flag` per object in [0, 1]; pack it with
    `rec pack --pass-through --pack-label`.

    \b
    Examples:
      rec list ./example --recursive
      rec list ./data --recursive --train-ratio 0.8 --test-ratio 0.1 --stratify
      rec list ./images -o lists/train --chunks 4 --exts .jpg,.webp --json
      rec list VOCdevkit/VOC2007 --boxes voc --image-set trainval -o voc_trainval
      rec list coco/val2017 --boxes coco --annotations instances_val2017.json
    """
    with handle_errors():
        names = read_class_order(classes_file) if classes_file else None
        options = ListOptions(
            recursive=recursive, exts=exts, chunks=chunks, train_ratio=train_ratio,
            test_ratio=test_ratio, shuffle=shuffle, seed=seed, follow_links=follow_links,
            stratify=stratify, min_per_class=min_per_class, splits=splits,
            classes=None if names is None or boxes is not None else tuple(names),
        )  # fmt: skip
        out = prefix if prefix is not None else _default_prefix(root)
        box_options = None
        if boxes is not None:
            from ..listing.boxes import BoxOptions, Convention, Crowd, Format  # (numpy)

            _refuse_folder_options(boxes)
            box_options = BoxOptions(
                cast(Format, boxes), image_set=image_set, annotations=annotations,
                classes=names, keep_empty=keep_empty, crowd=cast(Crowd, crowd),
                convention=cast(Convention, convention),
            )  # fmt: skip
        elif any((image_set, annotations, keep_empty, convention != "im2rec")):
            raise ConfigError(
                "--image-set, --annotations, --keep-empty and --convention apply to --boxes"
            )
        with progress_counter(_describe, quiet=quiet or as_json) as on_progress:
            result = make_lists(
                root, out, options, strict=strict, on_progress=on_progress, boxes=box_options
            )
    _report_skipped(result)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    elif not quiet:
        _print_summary(result, options.exts)


def _refuse_folder_options(boxes: str) -> None:
    """A folder walk's own options mean nothing for an annotation set."""
    ctx = click.get_current_context()
    for name in ("recursive", "exts", "follow_links", "min_per_class"):
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(
                f"{flag} walks folders; --boxes {boxes} lists what the annotations name"
            )


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


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _print_summary(result: ListResult, exts: tuple[str, ...]) -> None:
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
    if result.splits:
        folders = ", ".join(f"{folder}/" for folder, _ in result.splits)
        console.print(
            f"The folders {folders} are splits: each is its own list, and the "
            f"{len(scan.classes):,} classes of all of them share one class map "
            "(--no-splits: one tree)",
            markup=False,
        )
    classes = result.to_dict()["classes"]
    counts = [c["images"] for c in classes]
    boxes = bool(classes) and "objects" in classes[0]
    if boxes:
        console.print(f"Objects: {sum(c['objects'] for c in classes):,}")
    if len(counts) <= _SHOW_CLASSES:
        shown = ", ".join(
            f"{c['label']} {scan.classes[c['label']]} ({_count(c['images'], 'image')}"
            + (f", {_count(c['objects'], 'box', 'boxes')})" if boxes else ")")
            for c in classes
        )
        console.print(f"Classes: {shown}", markup=False)
    else:
        console.print(
            f"Classes: {min(counts):,} to {max(counts):,} images each"
            + (" (holding one of its boxes)" if boxes else "")
        )
    _print_passed(result, exts)
    console.print(f"Class map: {result.class_map}; run record: {result.manifest}", markup=False)


def _print_passed(result: ListResult, exts: tuple[str, ...]) -> None:
    """What the listing passed over on purpose, and the option that lists it."""
    from ..listing.walking import OTHER_EXTENSION

    passed = result.scan.passed
    console = out_console()
    others = {what.split()[-1]: n for what, n in passed.items() if what.startswith(OTHER_EXTENSION)}
    if others:
        wanted = ",".join([*exts, *others])
        counted = ", ".join(f"{n:,} {ext}" for ext, n in others.items())
        console.print(
            f"Passed over {sum(others.values()):,} image files of other extensions ({counted}); "
            f"to list them too: --exts {wanted}",
            markup=False,
        )
    for what, n in passed.items():
        if not what.startswith(OTHER_EXTENSION):
            what = what.removeprefix("images ")  # (counted: one image, two images)
            console.print(
                f"Left out {_count(n, 'image')} {what} (--keep-empty lists them)", markup=False
            )
