"""Packing one list into N shards, each a separate ``.rec``/``.idx`` pair.

Shard ``i`` of ``N`` of ``train.lst`` holds a contiguous slice of the list
(sizes differ by at most one entry) and is written as
``train-0000i-of-0000N.rec``, ``.idx``, ``.pack.json`` (its manifest) and,
when images failed, ``.failures.tsv``. Zero-padded numbers sort the shards in
list order, so the shards read in name order hold exactly the records of an
unsharded pack, byte for byte.

:func:`pack_shard` is the unit of work, on this machine or a cluster worker:
a pure function of (list slice, options, destination). It packs into a
private staging folder beside the outputs and renames the finished files into
place, manifest last, so a task that runs twice (a retry after a worker died,
or a duplicate) leaves the same bytes and never a half-written file. With
``resume=True`` a shard whose manifest matches its slice and whose files
match the manifest's SHA-256 is skipped.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import DatasetError
from ..listing.lstfile import ListStream
from ..recordio import RecordIndex, load_index
from ..recordio.manifests import (
    SHARDS_FORMAT,
    ShardEntry,
    ShardManifest,
    dump,
)
from ..storage import is_url, write_bytes
from ..storage.atomic import exclusive
from ..storage.objects import list_names, size_of, url_join
from . import PackOptions, resolve_root
from .resuming import check_replaceable
from .shards import ShardResult, ShardSpec, shard_specs

__all__ = [
    "RunHooks",
    "ShardRunner",
    "ShardedResult",
    "pack_sharded",
    "stale_shards",
    "write_global_index",
]

Progress = Callable[[int, int, int], None]  # (entries done, entries, bytes written)
#: (shard index, entries of that shard done, its bytes written)
ShardProgress = Callable[[int, int, int], None]


def write_global_index(specs: Sequence[ShardSpec], path: str) -> int:
    """One ``.idx`` over all shards, offsets counted across the shards
    concatenated in name order (what DALI's ``readers.mxnet`` wants with
    several ``.rec`` paths). Returns the number of entries."""
    keys: list[Any] = []
    offsets: list[np.ndarray] = []
    base = 0
    for spec in specs:
        index = load_index(spec.location(".idx"), cache=False)
        keys.extend(index.key_list())
        offsets.append(index.offsets + base)
        base += size_of(spec.location(".rec")) or 0
    merged = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    RecordIndex(keys, merged, str(path)).save(path)
    return len(keys)


def write_shard_manifest(
    lst: str, specs: Sequence[ShardSpec], results: Sequence[ShardResult], path: str
) -> None:
    """``NAME.shards.json``: the shards in order with their counts and sizes."""
    by_index = {r.index: r for r in results}
    shards: list[ShardEntry] = [
        {
            "rec": spec.path(".rec").name,
            "idx": spec.path(".idx").name,
            "entries": spec.entries,
            "records": by_index[spec.index].records,
            "bytes": by_index[spec.index].bytes,
            "failures": dict(by_index[spec.index].failures),
        }
        for spec in specs
    ]
    data: ShardManifest = {"format": SHARDS_FORMAT, "list": lst, "shards": shards,
                           "written": time.strftime("%Y-%m-%dT%H:%M:%S")}  # fmt: skip
    write_bytes(path, dump(data).encode("utf-8"))


def stale_shards(folder: str, stem: str, count: int) -> list[str]:
    """Shard outputs of list ``stem`` in ``folder`` (or a URL prefix) from a
    run with another shard count."""
    pattern = re.compile(rf"{re.escape(stem)}-\d{{5}}-of-(\d{{5}})\.(rec|idx)$")
    join = url_join if is_url(folder) else os.path.join
    return [
        join(folder, name)
        for name in list_names(folder)
        if (m := pattern.match(name)) is not None and int(m.group(1)) != count
    ]


def remove_staging(lst: Path, count: int) -> None:
    """Staging folders left by attempts that died (a killed worker)."""
    for path in lst.parent.glob(f".{glob_escape(lst.stem)}-*-of-{count:05d}.*.staging"):
        shutil.rmtree(path, ignore_errors=True)


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


@dataclass(frozen=True)
class RunHooks:
    """How a runner packs and reports: ``on_result`` as each shard finishes,
    ``on_progress`` while one is being packed."""

    resume: bool
    on_result: Callable[[ShardResult], None]
    on_progress: ShardProgress


class ShardRunner(Protocol):
    """Runs :func:`pack_shard` over shard specs: here, or on a cluster."""

    def check(self, root: str, sample: str, out_dir: str) -> None:
        """Fail early if the workers cannot see the root or write the output."""

    def run(self, specs: Sequence[ShardSpec], hooks: RunHooks) -> None:
        """Pack every shard."""


@dataclass
class ShardedResult:
    """What :func:`pack_sharded` did for one list (paths, or URLs in a store)."""

    lst: str
    count: int
    entries: int
    shards: list[ShardResult]
    seconds: float
    manifest: str
    global_index: str | None = None
    stale: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The list's file name."""
        return self.lst.replace("\\", "/").rsplit("/", 1)[-1]

    @property
    def stem(self) -> str:
        return self.name.rsplit(".", 1)[0]

    @property
    def records(self) -> int:
        return sum(r.records for r in self.shards)

    @property
    def failures(self) -> Counter[str]:
        return sum((r.failures for r in self.shards), Counter())

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.shards)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lst": self.lst, "shards": [r.to_dict() for r in self.shards],
            "count": self.count, "entries": self.entries, "records": self.records,
            "failures": dict(self.failures), "bytes": self.bytes, "seconds": self.seconds,
            "manifest": self.manifest, "global_index": self.global_index, "stale": self.stale,
        }  # fmt: skip


@dataclass(frozen=True)
class _Run:
    shards: int
    runner: ShardRunner
    root: str | os.PathLike[str] | None
    resume: bool
    global_index: bool
    on_progress: Progress | None
    overwrite: bool


def pack_sharded(
    lst: str | os.PathLike[str],
    options: PackOptions,
    *,
    shards: int,
    runner: ShardRunner,
    root: str | os.PathLike[str] | None = None,
    resume: bool = False,
    global_index: bool = False,
    on_progress: Progress | None = None,
    overwrite: bool = True,
) -> ShardedResult:
    """Pack ``lst`` into ``shards`` shards with ``runner``; then write
    ``NAME.shards.json`` and, with ``global_index``, ``NAME.global.idx``.
    A list in a store (a URL) gets its shards beside it in the store (see
    :mod:`.published`). ``overwrite=False`` refuses to replace finished
    shards made otherwise (see :func:`~im2rec.packing.resuming.check_replaceable`).
    Raises :class:`~im2rec.storage.atomic.BusyError` while another process packs the
    same list."""
    run = _Run(shards, runner, root, resume, global_index, on_progress, overwrite)
    if is_url(lst):
        from .remote import spooled_list

        url = os.fspath(lst)
        with spooled_list(url) as (local, root_found):
            if root is None:
                run = dataclasses.replace(run, root=root_found())
            return _pack_sharded(local, options, run, url, url.rsplit("/", 1)[0])
    path = Path(lst)
    with exclusive(path, "packing"):
        return _pack_sharded(path, options, run, str(path), str(path.parent.resolve()))


def _pack_sharded(
    path: Path, options: PackOptions, run: _Run, shown: str, out_dir: str
) -> ShardedResult:
    """Pack the local list ``path`` (shown as ``shown``) into shards in ``out_dir``."""
    items = ListStream.scan(path)  # (read again, once, to make the shards' texts)
    if not items:
        raise DatasetError(f"{shown}: the list has no entries")
    root_s = resolve_root(path, run.root)
    specs = shard_specs(path, items, run.shards, options, root_s, out_dir)
    if not run.overwrite and is_url(out_dir):
        from .published import check_shards_replaceable

        check_shards_replaceable(specs, path.name)
    for spec in specs if not run.overwrite and not is_url(out_dir) else ():
        rec = spec.path(".rec")
        check_replaceable(rec, spec.path(".pack.json"), spec.state(), path.name, "the shards")
    run.runner.check(root_s, next(iter(items)).path, out_dir)
    results: list[ShardResult] = []
    progress = {spec.index: (0, 0) for spec in specs}

    def shard_progress(index: int, done: int, nbytes: int) -> None:
        progress[index] = (done, nbytes)
        if run.on_progress is not None:
            values = progress.values()
            run.on_progress(sum(d for d, _ in values), len(items), sum(b for _, b in values))

    def shard_done(result: ShardResult) -> None:
        results.append(result)
        shard_progress(result.index, result.entries, result.bytes)

    t0 = time.perf_counter()
    run.runner.run(specs, RunHooks(run.resume, shard_done, shard_progress))
    seconds = time.perf_counter() - t0
    if not is_url(out_dir):
        remove_staging(path, run.shards)
    results.sort(key=lambda r: r.index)
    join = url_join if is_url(out_dir) else os.path.join
    manifest = join(out_dir, f"{path.stem}.shards.json")
    write_shard_manifest(path.name, specs, results, manifest)
    result = ShardedResult(shown, run.shards, len(items), results, seconds, manifest)
    if run.global_index:
        result.global_index = join(out_dir, f"{path.stem}.global.idx")
        write_global_index(specs, result.global_index)
    result.stale = stale_shards(out_dir, path.stem, run.shards)
    return result
