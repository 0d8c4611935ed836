"""``rec imagenet``: prepare ILSVRC2012 as GluonCV's imagenet.py does."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ..imagenet import ImagenetOptions, ImagenetResult, prepare_imagenet
from .common import (
    count_text,
    err_console,
    handle_errors,
    num_workers_option,
    out_console,
    size_text,
)

__all__ = ["imagenet_command"]

STEPS = {
    "train": "extracting train",
    "val": "extracting val",
    "train.rec": "packing train.rec",
    "val.rec": "packing val.rec",
}


@click.command("imagenet")
@click.option(
    "--download-dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder with ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar.",
)
@click.option(
    "--target-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default="~/.mxnet/datasets/imagenet",
    show_default=True,
    help="Where train/, val/ and rec/ go.",
)
@click.option("--checksum", is_flag=True, help="Check the tars' SHA-1 first (reads ~154 GB).")
@click.option("--with-rec", is_flag=True, help="Also pack rec/train.rec/.idx and rec/val.rec/.idx.")
@num_workers_option(1, "Threads that read images while packing (as GluonCV's --num-thread).")
@click.option(
    "--val-map",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Val labels: GluonCV pklz/pkl, `fname wnid` lines, valprep.sh or TF synset labels "
    "[default: imagenet_val_maps.pklz in --download-dir, else the map bundled with im2rec].",
)
@click.option(
    "--devkit",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="ILSVRC2012_devkit_t12.tar.gz; with --val-map too, the two are cross-checked.",
)
@click.option("--resume", is_flag=True, help="Continue an interrupted run.")
@click.option(
    "--fix-odd-images",
    is_flag=True,
    help="Re-encode the PNG and CMYK files named .JPEG to RGB JPEG (default: keep the bytes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars and no summary.")
def imagenet_command(
    download_dir: Path,
    target_dir: Path,
    checksum: bool,
    with_rec: bool,
    num_workers: int,
    val_map: Path | None,
    devkit: Path | None,
    resume: bool,
    fix_odd_images: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Prepare ILSVRC2012 (ImageNet) from its two tars, like GluonCV's imagenet.py.

    Checks everything first (tars, val map, every member name, free space);
    then extracts train/<wnid>/ and val/<wnid>/ (and with --with-rec packs
    rec/train and rec/val, labels 0-999 in sorted-WNID order) into
    TARGET.partial, renamed to TARGET when all is done. Needs no network.

    \b
    Examples:
      rec imagenet --download-dir ~/ILSVRC2012 --with-rec --num-workers 8
      rec imagenet --download-dir ~/ILSVRC2012 --devkit ~/devkit_t12.tar.gz
      rec imagenet --download-dir ~/ILSVRC2012 --with-rec --resume
    """
    opts = ImagenetOptions(
        download_dir, target_dir, checksum, with_rec, num_workers, val_map, devkit, resume,
        fix_odd_images,
    )  # fmt: skip
    with handle_errors(), _progress(quiet or as_json) as progress:
        result = prepare_imagenet(opts, on_progress=progress)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    elif not quiet:
        _summary(result)


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    console = err_console()
    if quiet or not console.is_terminal:
        yield lambda _s, _d, _t: None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    tasks: dict[str, Any] = {}
    with Progress(
        TextColumn("{task.description:18}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TimeRemainingColumn(), console=console,
    ) as bars, Progress(  # fmt: skip
        TextColumn("{task.description:18}"), BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), console=console,
    ) as counts:  # fmt: skip

        def update(step: str, done: int, total: int) -> None:
            bar = counts if step.endswith(".rec") else bars
            if step not in tasks:
                name = STEPS.get(step, step.replace("ILSVRC2012_img_", "").replace(".tar", ""))
                tasks[step] = bar.add_task(name, total=total)
            bar.update(tasks[step], completed=done, total=total)

        yield update


def _summary(r: ImagenetResult) -> None:
    console = out_console()
    if r.already_done:
        console.print(f"{r.target}: already prepared by rec imagenet; nothing to do", markup=False)
        return
    console.print(
        f"[bold]{r.target}[/]: {r.classes:,} classes, {r.train_images:,} train and "
        f"{r.val_images:,} val images in {r.seconds:,.0f} s (val labels from {r.val_map})"
    )
    for split, info in r.rec.items():
        console.print(
            f"  rec/{split}.rec + .idx: {count_text(info['records'], 'record')}, "
            f"{size_text(info['bytes'])}",
            markup=False,
        )
    if r.odd_images:
        kinds = sorted({o.kind for o in r.odd_images})
        broken = [o for o in r.odd_images if o.action.startswith("not ")]
        action = r.odd_images[0].action if not broken else "re-encoded"
        console.print(
            f"  {len(r.odd_images)} odd image(s) ({', '.join(kinds)}) {action}; listed in "
            f"{r.target / 'odd_images.tsv'}",
            markup=False,
        )
        for odd in broken:
            console.print(
                f"  {odd.path} could not be re-encoded and was kept as it is: {odd.action}; "
                "check or replace that file (training readers may fail on it)",
                markup=False,
            )
