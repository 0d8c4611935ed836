"""``rec pack``: ``.lst`` files to ``.rec``/``.idx``."""

from __future__ import annotations

import json

import click

from ..executors import LocalExecutor, default_workers
from ..lstfile import find_lists
from ..packing import PackOptions, PackResult, pack_list
from .common import err_console, handle_errors, out_console, progress_bar

__all__ = ["pack_command"]


@click.command("pack")
@click.argument("targets", nargs=-1, metavar="[LIST_OR_PREFIX]...")
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False),
    help="Folder the list's paths are relative to. [default: the root recorded "
    "by `rec list`, else the folder named like the list]",
)
@click.option(
    "--num-workers",
    "--num-thread",
    "num_workers",
    type=click.IntRange(min=1),
    default=default_workers,
    show_default="number of CPUs",
    help="Worker processes that read and encode images.",
)
@click.option("--pass-through", is_flag=True, help="Store the image files' bytes unchanged.")
@click.option(
    "--pack-label",
    is_flag=True,
    help="Store every label of lines with several (flag = count), as im2rec.py.",
)
@click.option(
    "--resize",
    type=int,
    default=0,
    show_default=True,
    help="Resize so the shorter side is this many pixels (0: keep).",
)
@click.option("--center-crop", is_flag=True, help="Crop the centred square first.")
@click.option(
    "--quality",
    type=int,
    default=95,
    show_default=True,
    help="JPEG quality; for PNG the zlib level, clamped to 0-9.",
)
@click.option("--encoding", type=click.Choice([".jpg", ".png"]), default=".jpg", show_default=True)
@click.option(
    "--color",
    type=click.Choice(["1", "0", "-1"]),
    default="1",
    show_default=True,
    help="1 colour, 0 gray, -1 as stored (keeps alpha and 16 bits for PNG).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue an interrupted run from its partial output (or skip a finished one).",
)
@click.option("--strict", is_flag=True, help="Exit 1 if any image failed.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
def pack_command(
    targets: tuple[str, ...],
    root: str | None,
    num_workers: int,
    pass_through: bool,
    pack_label: bool,
    resize: int,
    center_crop: bool,
    quality: int,
    encoding: str,
    color: str,
    resume: bool,
    strict: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Pack .lst files into .rec/.idx files beside them, as im2rec.py does.

    With no argument, packs every .lst in the current folder; with a prefix,
    every PREFIX*.lst; with .lst paths, those. `ex.lst` becomes `ex.rec` and
    `ex.idx`, plus `ex.pack.json` (counts, options, sizes, SHA-256) and, when
    images failed, `ex.failures.tsv`. A bad image never stops the run; outputs
    appear only when a list is done; after Ctrl-C or a crash, --resume
    continues where it stopped, with the same bytes as an uninterrupted run.

    \b
    Examples:
      rec list ./example --recursive && rec pack --pass-through --pack-label
      rec pack data_train.lst data_val.lst --resize 256 --quality 90 --num-workers 8
      rec pack lists/train --root /data/images --resume --json
    """
    results: list[PackResult] = []
    with handle_errors():
        options = PackOptions(
            pass_through=pass_through, pack_label=pack_label, resize=resize,
            center_crop=center_crop, quality=quality, encoding=encoding, color=int(color),
        )  # fmt: skip
        lists = find_lists(list(targets))
        executor = LocalExecutor(num_workers, preload=["im2rec.packing"])
        executor.start(io_bound=options.pass_through)  # workers start while the lists are read
        with executor, progress_bar(quiet=quiet or as_json) as bar:
            for lst in lists:
                track = bar.track(lst.name, total=0)
                result = pack_list(
                    lst, options, root=root, executor=executor, resume=resume, on_progress=track
                )
                results.append(result)
                _warn(result)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in results], indent=1))
    elif not quiet:
        _summary(results)
    failed = sum(sum(r.failures.values()) for r in results)
    if strict and failed:
        raise click.ClickException(
            f"{failed:,} image(s) failed (--strict); see the failure report(s)"
        )


def _warn(result: PackResult) -> None:
    if result.dropped_labels:
        err_console().print(
            f"[yellow]{result.dropped_labels:,} line(s) of {result.lst.name} have more than one "
            "label; only the first was packed (pass --pack-label to keep them all)[/]"
        )


def _summary(results: list[PackResult]) -> None:
    console = out_console()
    for r in results:
        if r.already_done:
            console.print(
                f"{r.lst.name}: already packed into {r.rec.name} (--resume); nothing to do"
            )
            continue
        failed = sum(r.failures.values())
        rate = (r.entries - r.resumed_from) / r.seconds if r.seconds else 0.0
        resumed = f", resumed after {r.resumed_from:,}" if r.resumed_from else ""
        console.print(
            f"{r.lst.name} -> [bold]{r.rec.name}[/] + {r.idx.name}: {r.records:,} records, "
            f"{r.bytes / 1e6:,.1f} MB in {r.seconds:,.1f} s ({rate:,.0f} images/s){resumed}"
        )
        if failed:
            reasons = ", ".join(f"{n:,} {reason}" for reason, n in r.failures.most_common())
            console.print(
                f"  [yellow]{failed:,} failed[/] ({reasons}); listed in {r.failure_report}"
            )
        console.print(f"  manifest: {r.manifest}", markup=False)
