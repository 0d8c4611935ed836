"""``rec pack``: ``.lst`` files to ``.rec``/``.idx``."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import MissingFileError
from ..executors import LocalExecutor, default_workers
from ..listing.finding import find_lists
from ..packing import PackOptions, PackResult, all_failed, likely_cause, pack_list
from ..packing.preflight import check_list
from .common import (
    InputPath,
    count_text,
    err_console,
    handle_errors,
    num_workers_option,
    out_console,
    print_property,
    progress_bar,
    size_text,
)

if TYPE_CHECKING:  # sharding (and numpy) load only for --shards
    from ..packing.sharding import ShardedResult, ShardRunner

__all__ = ["pack_command"]


@click.command("pack")
@click.argument("targets", nargs=-1, metavar="[LIST_OR_PREFIX]...")
@click.option(
    "--root",
    type=InputPath(exists=True, file_okay=False),
    help="Folder (or URL prefix) the list's paths are relative to. [default: the root "
    "recorded by `rec list`, else the folder named like the list]",
)
@num_workers_option(
    default_workers,
    "Workers that read and encode images: processes, or threads with --pass-through "
    "(which only reads).",
    "number of CPUs",
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
@click.option(
    "--encoding",
    type=click.Choice([".jpg", ".png"]),
    default=".jpg",
    show_default=True,
    help="Format of re-encoded images (PNG keeps alpha and 16 bits with --color -1).",
)
@click.option(
    "--color",
    type=click.Choice(["1", "0", "-1"]),
    default="1",
    show_default=True,
    help="1 colour, 0 gray, -1 as stored (keeps alpha and 16 bits for PNG).",
)
@click.option(
    "--layout",
    type=click.Choice(["plain", "insightface"]),
    default="plain",
    show_default=True,
    help="insightface: InsightFace's face layout (face2rec2.py's): images grouped by identity "
    "(the first label), a header record 0 and one record per identity.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue an interrupted run from its partial output (or skip a finished one).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Start over: discard an interrupted run's partial output, and replace finished "
    "outputs made from another version of the list, another root or other options, or not by "
    "rec pack (both refused otherwise).",
)
@click.option(
    "--shards",
    type=click.IntRange(min=1),
    help="Split each list into N shards: NAME-0000i-of-0000N.rec/.idx/.pack.json.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="Where shards run: this machine's worker pool, or a Dask cluster (needs --shards).",
)
@click.option(
    "--scheduler",
    envvar="DASK_SCHEDULER_ADDRESS",
    metavar="ADDRESS",
    help="Dask scheduler, e.g. tcp://head:8786 [env DASK_SCHEDULER_ADDRESS; default: "
    "a local cluster of --num-workers processes].",
)
@click.option(
    "--global-index",
    is_flag=True,
    help="Also write NAME.global.idx: one index over all shards, offsets counted across "
    "them in order (for DALI's readers.mxnet).",
)
@click.option(
    "--allow-class-mismatch",
    is_flag=True,
    help="Pack a list whose class map labels a class otherwise than a sibling split's "
    "(refused by default: the splits of one dataset need one class map).",
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
    layout: str,
    resume: bool,
    overwrite: bool,
    shards: int | None,
    executor: str,
    scheduler: str | None,
    global_index: bool,
    allow_class_mismatch: bool,
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
    A finished .rec made otherwise (other options, another version of the
    list) is replaced only with --overwrite.

    \b
    Examples:
      rec list ./example --recursive && rec pack --pass-through --pack-label
      rec pack data_train.lst data_val.lst --resize 256 --num-workers 8
      rec pack train.lst --shards 64 --executor dask --scheduler tcp://head:8786
      rec pack faces.lst --layout insightface --resize 112 --center-crop
    """
    _check_shard_options(shards, executor, global_index)
    if shards is not None and layout != "plain":
        raise click.UsageError(
            "--layout insightface makes one file (its ranges span it): drop --shards"
        )
    results: list[PackResult | ShardedResult] = []
    with handle_errors():
        options = PackOptions(
            pass_through=pass_through, pack_label=pack_label, resize=resize,
            center_crop=center_crop, quality=quality, encoding=encoding, color=int(color),
            layout=layout,
        )  # fmt: skip
        if executor == "dask":
            from ..packing.cluster import require_dask

            require_dask()  # before any work: a missing extra is a setup mistake
        lists = _find_lists(targets)
        for lst in lists:  # every list checked before any is packed
            check_list(lst, options, allow_class_mismatch=allow_class_mismatch)
        with ExitStack() as stack:
            # Workers re-encoding images need Pillow; pass-through reads in threads.
            preload = [] if pass_through else ["im2rec.packing", "im2rec.imaging.codec"]
            pool = stack.enter_context(LocalExecutor(num_workers, preload=preload))
            runner = _runner(stack, pool, executor, scheduler, num_workers, options, shards)
            bar = stack.enter_context(progress_bar(quiet=quiet or as_json))
            for lst in lists:
                track = bar.track(os.path.basename(lst), total=0)
                if shards is None:
                    result: Any = pack_list(
                        lst, options, root=root, executor=pool, resume=resume,
                        on_progress=track, overwrite=overwrite,
                    )  # fmt: skip
                else:
                    from ..packing.sharding import pack_sharded

                    assert runner is not None
                    result = pack_sharded(
                        lst, options, shards=shards, runner=runner, root=root, resume=resume,
                        global_index=global_index, on_progress=track, overwrite=overwrite,
                    )  # fmt: skip
                results.append(result)
                _warn(result)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in results], indent=1))
    elif not quiet:
        _summary(results)
    for r in results:  # (pack_list raises this itself for a plain list)
        if not isinstance(r, PackResult) and r.entries and r.records == 0:
            raise click.ClickException(
                all_failed(r.lst, r.entries, r.failures, outcome="so its shards hold no records")
            )
    failed = sum(sum(r.failures.values()) for r in results)
    if strict and failed:
        raise click.ClickException(
            f"{failed:,} image(s) failed (--strict); see the failure report(s)"
        )


def _find_lists(targets: tuple[str, ...]) -> list[Path | str]:
    """The lists to pack: paths, or URLs (lists in a store)."""
    from ..storage import is_url

    found: list[Path | str] = []
    local = [t for t in targets if not is_url(t)]
    if local or not targets:
        try:
            found.extend(find_lists(local))
        except MissingFileError as exc:  # an input named on the command line: a usage mistake
            raise click.UsageError(str(exc)) from None
    for target in targets:
        if is_url(target):
            from ..packing.remote import find_remote_lists

            found.extend(find_remote_lists(target))
    return found


def _check_shard_options(shards: int | None, executor: str, global_index: bool) -> None:
    ctx = click.get_current_context()
    if shards is None and executor == "dask":
        raise click.UsageError("--executor dask packs shards: add --shards N (e.g. 4 per worker)")
    if shards is None and global_index:
        raise click.UsageError("--global-index indexes shards: add --shards N")
    source = ctx.get_parameter_source("scheduler")
    if executor == "local" and source == click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("--scheduler needs --executor dask")


def _runner(
    stack: ExitStack,
    pool: LocalExecutor,
    executor: str,
    scheduler: str | None,
    workers: int,
    options: PackOptions,
    shards: int | None,
) -> ShardRunner | None:
    """Where shards run (None without --shards); local workers start now,
    while the lists are read."""
    if executor == "dask" and shards is not None:
        from ..packing.cluster import DaskRunner

        return stack.enter_context(DaskRunner(scheduler, workers=workers))
    pool.start(io_bound=options.pass_through)
    if shards is None:
        return None
    from ..packing.cluster import LocalRunner

    return LocalRunner(pool)


def _warn(result: PackResult | ShardedResult) -> None:
    if not isinstance(result, PackResult):
        if result.stale:
            names = ", ".join(p.rsplit("/", 1)[-1] for p in result.stale[:4])
            more = f" and {len(result.stale) - 4} more" if len(result.stale) > 4 else ""
            err_console().print(
                f"[yellow]shards of an earlier run with another --shards count are still "
                f"beside the list ({names}{more}); delete them before reading "
                f"{result.stem}-*.rec[/]",
            )
        return
    failed = sum(result.failures.values())
    if result.records and failed > result.records and not result.already_done:
        err_console().print(
            f"[yellow]{result.lst.name}: {failed:,} of {result.entries:,} images failed, more "
            f"than were packed; {likely_cause(result.failures, result.root)}[/]",
            markup=True,
        )
    if result.discarded_partial:
        err_console().print(
            f"[yellow]{result.lst.name}: an interrupted run's partial output "
            f"({result.discarded_partial:,} bytes) was discarded and packing started over "
            "(--overwrite)[/]"
        )
    if result.dropped_labels:
        err_console().print(
            f"[yellow]{result.dropped_labels:,} line(s) of {result.lst.name} have more than one "
            "label; only the first was packed (pass --pack-label to keep them all)[/]"
        )


def _summary(results: list[PackResult | ShardedResult]) -> None:
    console = out_console()
    for r in results:
        if not isinstance(r, PackResult):
            _shard_summary(r)
            continue
        if r.already_done:
            console.print(
                f"{r.lst.name}: already packed into {r.rec.name} (--resume); nothing to do"
            )
            continue
        failed = sum(r.failures.values())
        done = r.entries - r.resumed_from  # by this run
        rate = done / r.seconds if r.seconds else 0.0
        timing = f"in {r.seconds:,.1f} s ({rate:,.0f} images/s)"
        if r.resumed_from:  # the totals count the earlier run too; the rate only this one
            timing = (
                f"; resumed after {r.resumed_from:,} of {r.entries:,} entries, "
                f"the other {done:,} {timing}"
            )
        what = count_text(r.records, "record")
        if r.identities is not None:  # the header and identity records are not images
            what = f"{r.records:,} images of {r.identities:,} identities (InsightFace layout)"
        console.print(
            f"{r.lst.name} -> [bold]{r.rec.name}[/] + {r.idx.name}: {what}, "
            f"{size_text(r.bytes)}{'' if r.resumed_from else ' '}{timing}"
        )
        if failed:
            reasons = ", ".join(f"{n:,} {reason}" for reason, n in r.failures.most_common())
            console.print(
                f"  [yellow]{failed:,} failed[/] ({reasons}); listed in {r.where('report')}"
            )
        if r.identities is not None:
            print_property(console, r.where("property") if r.property else None, r.property_note)
        console.print(f"  manifest: {r.where('manifest')}", markup=False)


SHARD_TABLE_MAX = 16  # more shards: the slowest three, and the rest in NAME.shards.json


def _shard_table(r: ShardedResult) -> Any:
    from rich.table import Table

    table = Table(box=None, padding=(0, 2), pad_edge=True)
    for name in ("shard", "records", "failed", "MB", "seconds", "worker"):
        table.add_column(name, justify="left" if name in ("shard", "worker") else "right")
    slowest = max((s.seconds for s in r.shards), default=0.0)
    for s in r.shards:
        seconds = "verified" if s.skipped else f"{s.seconds:,.1f}"
        if s.seconds == slowest and len(r.shards) > 1 and not s.skipped:
            seconds = f"[yellow]{seconds}[/]"
        table.add_row(
            f"{s.index:05d}", f"{s.records:,}", f"{sum(s.failures.values()):,}",
            f"{s.bytes / 1e6:,.1f}", seconds, s.worker or "-",
        )  # fmt: skip
    return table


def _shard_summary(r: ShardedResult) -> None:
    console = out_console()
    skipped = [s for s in r.shards if s.skipped]
    packed = [s for s in r.shards if not s.skipped]
    rate = sum(s.entries for s in packed) / r.seconds if r.seconds else 0.0
    workers = {s.worker for s in packed}
    where = "this machine" if workers == {"local"} else f"{len(workers)} worker(s)"
    first = f"{r.stem}-00000-of-{r.count:05d}.rec"
    console.print(
        f"{r.name} -> [bold]{r.count} shards[/] ({first} ...): {count_text(r.records, 'record')}, "
        f"{size_text(r.bytes)}"
        + (f" in {r.seconds:,.1f} s ({rate:,.0f} images/s on {where})" if packed else "")
    )
    if skipped:
        console.print(
            f"  {len(skipped)} shard(s) already packed and verified (--resume), "
            f"{len(packed)} packed now"
        )
    failed = sum(r.failures.values())
    if failed:
        reasons = ", ".join(f"{n:,} {reason}" for reason, n in r.failures.most_common())
        console.print(
            f"  [yellow]{failed:,} failed[/] ({reasons}); listed in {r.stem}-*.failures.tsv"
        )
    if len(r.shards) <= SHARD_TABLE_MAX:
        console.print(_shard_table(r))
    else:
        slow = sorted(packed, key=lambda s: -s.seconds)[:3]
        names = ", ".join(f"{s.index:05d} ({s.seconds:,.1f} s, {s.worker})" for s in slow)
        console.print(
            f"  slowest shards: {names}; every shard: {r.manifest.rsplit('/', 1)[-1]}", markup=False
        )
    if r.global_index is not None:
        console.print(f"  global index: {r.global_index}", markup=False)
    console.print(f"  shards manifest: {r.manifest}", markup=False)
