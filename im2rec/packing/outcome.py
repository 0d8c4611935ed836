"""What a pack did (:class:`PackResult`), how it stopped
(:class:`PackInterrupted`, :class:`DiskFullError`), and what to say when
every image failed."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import (
    Im2RecError,
)
from ..recordio.manifests import PackManifest
from .resuming import PartialFiles

KEPT = "the partial output is kept: run the same command with --resume to continue"


class PackInterrupted(Im2RecError):
    """Ctrl-C: the partial output is kept for ``--resume``."""

    exit_code = 130


class DiskFullError(Im2RecError):
    """No space left while writing, or the output may grow no larger (a file
    system's largest file, ``ulimit -f``); the partial output is kept for
    ``--resume``."""


_FIELDS = {"report": "failure_report"}


@dataclass
class PackResult:
    """What :func:`pack_list` did."""

    lst: Path
    rec: Path
    idx: Path
    manifest: Path
    failure_report: Path | None
    entries: int
    records: int
    failures: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    seconds: float = 0.0
    resumed_from: int = 0  # entries already packed by an earlier, interrupted run
    already_done: bool = False  # --resume found the finished output
    dropped_labels: int = 0  # lines whose extra labels were not packed (no --pack-label)
    discarded_partial: int = 0  # bytes of an interrupted run's output thrown away (no --resume)
    root: str = ""
    identities: int | None = None  # --layout insightface: the identities packed
    property: Path | None = None  # --layout insightface: InsightFace's property file written
    property_note: str | None = None  # why it was not
    #: where the outputs were published ("rec", "idx", "manifest", "report", "lst"), when
    #: the list is in a store (the paths above are then in the local spool)
    urls: dict[str, str] = field(default_factory=dict)

    def where(self, kind: str) -> str:
        """Where output ``kind`` is: its URL, or its path."""
        return self.urls.get(kind) or str(getattr(self, _FIELDS.get(kind, kind)))

    def to_dict(self) -> dict[str, Any]:
        d = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(self).items()}
        for kind, url in self.urls.items():
            d[_FIELDS.get(kind, kind)] = url
        d["failures"] = dict(self.failures)
        d["images_per_second"] = (
            (self.entries - self.resumed_from) / self.seconds if self.seconds else None
        )
        return d


def result_from_manifest(files: PartialFiles, items: Sized, manifest: PackManifest) -> PackResult:
    """The result of a finished pack, from its manifest."""
    report = files.report if files.report.exists() else None
    return PackResult(
        files.lst, files.rec, files.idx, files.manifest, report, len(items), manifest["records"],
        Counter(manifest["failures"]), manifest["rec"]["bytes"], resumed_from=len(items),
        already_done=True, root=manifest["root"],
    )  # fmt: skip


def likely_cause(failures: Counter[str], root: str) -> str:
    """What most likely went wrong when (nearly) every image failed."""
    total = sum(failures.values())
    if failures.get("missing", 0) * 2 > total:
        where = f" under {root}" if root else ""
        return (
            f"most were not found{where}: is that the folder the list's paths are "
            "relative to? Pass it with --root"
        )
    if failures.get("undecodable", 0) * 2 > total:
        return "most are not images Pillow can decode: are these image files?"
    return "see the failure report"


def all_failed(
    lst: str | Path,
    entries: int,
    failures: Counter[str],
    root: str = "",
    outcome: str = "so no .rec was written",
    listed_in: Path | None = None,
) -> str:
    """The error for a list whose every image failed (plain or sharded)."""
    reasons = ", ".join(f"{n:,} {k}" for k, n in sorted(failures.items()))
    where = f" (listed in {listed_in})" if listed_in else ""
    return (
        f"{lst}: every one of its {entries:,} images failed ({reasons}){where}, {outcome}; "
        f"{likely_cause(failures, root)}"
    )
