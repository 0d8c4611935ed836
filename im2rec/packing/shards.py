"""One shard of a sharded pack (``rec pack --shards N``): what it is
(:class:`ShardSpec`, a picklable slice of the list with the options, sent
to whichever worker packs it), packing it into a staging folder and
renaming it into place with its manifest last (:func:`pack_shard`), and
whether a finished one can be skipped (:func:`verified`). The run over
all shards is :mod:`.sharding`."""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..executors import WORKER_DIED, LocalExecutor, WorkerCrashed
from ..listing.lstfile import ListItem, ListStream, item_line
from ..recordio.manifests import (
    MadeWith,
    PackManifest,
    load_pack_manifest,
    made_with,
)
from ..storage import is_url
from ..storage.atomic import write_file
from ..storage.files import read_json
from ..storage.objects import url_join
from . import DiskFullError, PackInterrupted, PackOptions, PackResult, pack_list
from .pipeline import Progress
from .resuming import sha256_file

__all__ = ["ShardResult", "ShardSpec", "pack_shard", "shard_specs", "shard_stem", "verified"]


@dataclass(frozen=True)
class ShardSpec:
    """Everything one shard needs; small and picklable, so it can travel to
    a cluster worker."""

    name: str
    index: int
    count: int
    #: the shard's lines of the list, as a .lst text (a few bytes more than
    #: its paths: no Python object a line, so a spec ships small)
    text: str
    entries: int
    options: PackOptions
    root: str
    out_dir: str

    @property
    def items(self) -> list[ListItem]:
        """The shard's entries (lines numbered within the shard's own list)."""
        return [
            ListItem(int(key), tuple(map(float, labels)), path, line)
            for line, (key, *labels, path) in enumerate(
                (raw.split("\t") for raw in self.text.splitlines()), 1
            )
        ]

    @property
    def stem(self) -> str:
        return shard_stem(self.name, self.index, self.count)

    def path(self, suffix: str) -> Path:
        return Path(self.out_dir) / f"{self.stem}{suffix}"

    def location(self, suffix: str) -> str:
        """Where output ``suffix`` goes: a path, or a URL in a store."""
        if is_url(self.out_dir):
            return url_join(self.out_dir, f"{self.stem}{suffix}")
        return str(self.path(suffix))

    def list_text(self) -> str:
        return self.text

    def state(self) -> MadeWith:
        """What a finished shard's manifest must record (see :mod:`.resuming`)."""
        digest = hashlib.sha256(self.list_text().encode("utf-8")).hexdigest()
        return {"list_sha256": digest, "options": self.options.as_state(), "root": self.root}


@dataclass
class ShardResult:
    """What packing (or skipping) one shard did."""

    index: int
    entries: int
    records: int
    failures: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    seconds: float = 0.0
    skipped: bool = False  # --resume found it finished and verified
    worker: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failures"] = dict(self.failures)
        return d

    @classmethod
    def verified(cls, spec: ShardSpec, manifest: PackManifest) -> ShardResult:
        """The result of a finished shard that ``--resume`` skips, from its manifest."""
        return cls(
            spec.index, spec.entries, manifest["records"], Counter(manifest["failures"]),
            manifest["rec"]["bytes"], 0.0, skipped=True,
        )  # fmt: skip


def shard_stem(name: str, index: int, count: int) -> str:
    return f"{name}-{index:05d}-of-{count:05d}"


def shard_specs(
    lst: Path,
    items: ListStream | Sequence[ListItem],
    count: int,
    options: PackOptions,
    root: str,
    out_dir: str | None = None,
) -> list[ShardSpec]:
    """Contiguous, balanced slices of the list, in list order; the outputs go
    to ``out_dir`` (a folder or a URL prefix; default: beside the list).
    ``items`` is read once, in order (a :class:`ListStream` reads the file)."""
    if not 1 <= count <= len(items):
        raise ConfigError(
            f"--shards must be between 1 and the {len(items):,} entries of {lst.name}"
        )
    bounds = np.linspace(0, len(items), count + 1).round().astype(int).tolist()
    entries = iter(items)
    specs = []
    for i in range(count):
        size = bounds[i + 1] - bounds[i]
        text = "".join(map(item_line, itertools.islice(entries, size)))
        spec = ShardSpec(lst.stem, i, count, text, size, options, root,
                         out_dir or str(lst.parent.resolve()))  # fmt: skip
        specs.append(spec)
    return specs


_STOPPED = {
    PackInterrupted: "interrupted",
    WorkerCrashed: WORKER_DIED,
    DiskFullError: "no room for its output (disk full, or a file-size limit)",
}


def pack_shard(
    spec: ShardSpec,
    *,
    executor: LocalExecutor | None = None,
    resume: bool = False,
    on_progress: Progress | None = None,
) -> ShardResult:
    """Pack one shard (see the module doc); safe to run twice."""
    if resume:
        done = verified(spec)
        if done is not None:
            return done
    remote = is_url(spec.out_dir)
    if remote:  # a private folder on this machine; the store gets the finished files
        staging = Path(tempfile.mkdtemp(prefix=f"im2rec-{spec.stem}-"))
    else:
        staging = Path(spec.out_dir) / f".{spec.stem}.{uuid.uuid4().hex[:12]}.staging"
        staging.mkdir()
    try:
        lst = staging / f"{spec.stem}.lst"
        write_file(lst, spec.list_text())
        try:
            result = pack_list(
                lst, spec.options, root=spec.root, executor=executor, on_progress=on_progress
            )
        except (PackInterrupted, WorkerCrashed, DiskFullError) as exc:
            # The staging folder goes: unlike a whole list, a shard starts over.
            raise type(exc)(
                f"{spec.stem}: {_STOPPED[type(exc)]}; the finished shards are kept and this "
                "one starts over: run the same command with --resume to pack the rest"
            ) from exc
        if remote:
            from .published import publish_shard

            publish_shard(spec, result)
            return _shard_result(spec, result)
        report = spec.path(".failures.tsv")
        if result.failure_report is not None:
            os.replace(result.failure_report, report)
        else:
            report.unlink(missing_ok=True)
        os.replace(result.rec, spec.path(".rec"))
        os.replace(result.idx, spec.path(".idx"))
        os.replace(result.manifest, spec.path(".pack.json"))  # last: the shard is complete
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _shard_result(spec, result)


def _shard_result(spec: ShardSpec, result: PackResult) -> ShardResult:
    return ShardResult(
        spec.index, result.entries, result.records, result.failures, result.bytes,
        result.seconds,
    )  # fmt: skip


def verified(spec: ShardSpec) -> ShardResult | None:
    """The shard's result if its outputs are finished, made from this very
    slice, root and options, and unchanged since (SHA-256); else None."""
    if is_url(spec.out_dir):
        from .published import published_manifest

        manifest = published_manifest(spec)
        return None if manifest is None else ShardResult.verified(spec, manifest)
    try:
        path = spec.path(".pack.json")
        manifest = load_pack_manifest(read_json(path), str(path))
        ok = made_with(manifest) == spec.state() and all(
            sha256_file(spec.path(f".{kind}")) == manifest[kind]["sha256"]
            for kind in ("rec", "idx")
        )
    except (OSError, ValueError):
        return None
    return ShardResult.verified(spec, manifest) if ok else None
