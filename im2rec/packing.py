"""Packing a ``.lst`` into ``.rec``/``.idx`` (spec §3.3).

Stages: read the list (:mod:`im2rec.lstfile`); encode each image in a worker
(:class:`Encoder`: read the file, optionally re-encode it, prepend the
header); write the records in list order (:func:`pack_list`). A bad image is
a :class:`Failure` (data, not an exception): it is counted, written to the
failure report, and the run goes on.

Crash safety: records go to ``NAME.rec.partial`` / ``NAME.idx.partial``, the
``.idx`` flushed after the ``.rec``; ``NAME.rec.partial.json`` records what
the partial output was made from. Only a finished run renames them to
``NAME.rec`` / ``NAME.idx``. ``resume=True`` cuts the partial files back to
the last record that is complete in both and continues from the list entry
after it; since encoding is deterministic, the result is byte-identical to an
uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from . import __version__
from .atomic import AtomicGroup, exclusive
from .errors import (
    ConfigError,
    DatasetError,
    Im2RecError,
    ImageCodecError,
    ImageTooLargeError,
    MissingFileError,
)
from .executors import LocalExecutor, WorkerCrashed
from .lstfile import ListItem, find_root, printable, read_lst
from .recordio import MAX_RECORD_SIZE, IndexedRecordWriter, IRHeader, pack
from .recordio.files import NOT_REGULAR, open_regular, read_json
from .recordio.framing import needs_split
from .resuming import (
    PartialFiles,
    check_replaceable,
    finished,
    recover,
    sha256_file,
    start_fresh,
)

__all__ = [
    "DiskFullError",
    "Encoder",
    "Failure",
    "PackInterrupted",
    "PackOptions",
    "PackResult",
    "all_failed",
    "likely_cause",
    "pack_list",
    "resolve_root",
]

Progress = Callable[[int, int, int], None]  # (entries done, entries, bytes written)
MAX_SIDE = 65_535


@dataclass(frozen=True)
class PackOptions:
    """How images become records; defaults are im2rec.py's."""

    pass_through: bool = False
    pack_label: bool = False
    resize: int = 0
    center_crop: bool = False
    quality: int = 95
    encoding: str = ".jpg"
    color: int = 1

    def __post_init__(self) -> None:
        if self.encoding not in (".jpg", ".png"):
            raise ConfigError(f"--encoding must be .jpg or .png, got {self.encoding!r}")
        if self.color not in (-1, 0, 1):
            raise ConfigError(f"--color must be 1, 0 or -1, got {self.color}")
        if not 0 <= self.resize <= MAX_SIDE:
            raise ConfigError(
                f"--resize must be 0 (keep) or a size up to {MAX_SIDE:,} (the most a JPEG "
                f"side can be), got {self.resize}"
            )
        if not 0 <= self.quality <= 100:
            raise ConfigError(f"--quality must be between 0 and 100, got {self.quality}")
        if self.pass_through:
            changed = [
                flag
                for flag, value, default in (
                    ("--resize", self.resize, 0),
                    ("--center-crop", self.center_crop, False),
                    ("--quality", self.quality, 95),
                    ("--encoding", self.encoding, ".jpg"),
                    ("--color", self.color, 1),
                )  # fmt: skip
                if value != default
            ]
            if changed:
                raise ConfigError(
                    f"--pass-through stores the files unchanged, so {', '.join(changed)} "
                    "cannot apply; drop one or the other"
                )


@dataclass(frozen=True)
class Failure:
    """Why one image was not packed."""

    #: missing | unreadable | undecodable | decompression-bomb | output-too-large |
    #: record-too-large
    reason: str
    detail: str


class Packed(NamedTuple):
    """One image's record, as a worker made it: the header (and any labels),
    the image bytes, and whether the record must be written split (the
    worker scans it for magic words, so the writer does not)."""

    header: bytes
    image: bytes
    split: bool


@dataclass(frozen=True)
class Encoder:
    """The per-image stage; runs in worker processes (it is picklable)."""

    options: PackOptions
    root: str

    def __call__(self, item: ListItem) -> Packed | Failure:
        labels = item.labels
        label: Any = list(labels) if self.options.pack_label and len(labels) > 1 else labels[0]
        try:
            data = _read_file(os.path.join(self.root, item.path))
        except FileNotFoundError:
            return Failure("missing", "no such file")
        except OSError as exc:
            return Failure("unreadable", exc.strerror or str(exc))
        if isinstance(data, Failure):
            return data
        if not self.options.pass_through:
            encoded = _reencode(data, self.options)
            if isinstance(encoded, Failure):
                return encoded
            data = encoded
        # The header (and any labels) and the image stay two buffers: the
        # writer hands both to the kernel, so the image is never copied.
        header = pack(IRHeader(0, label, item.key, 0), b"")
        size = len(header) + len(data)
        if size >= MAX_RECORD_SIZE:
            return Failure("record-too-large", f"{size:,} bytes; RecordIO stores < 2**29")
        return Packed(header, data, needs_split(header, data))


def _read_file(path: str) -> bytes | Failure:
    """The file's bytes; a FIFO or device (a .lst can name anything) is a
    failure, not a read that waits forever or never ends, and a file too
    large for a record is refused before it is read."""
    try:
        fd, size = open_regular(path)
    except Im2RecError:
        return Failure("unreadable", NOT_REGULAR)
    try:
        if size >= MAX_RECORD_SIZE:
            return Failure("record-too-large", f"{size:,} bytes; RecordIO stores < 2**29")
        # os-level reads: no file object per image. One byte more than the
        # size tells a file that grew since fstat from one that did not.
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        parts = [data]
        while more := os.read(fd, 1 << 20):
            parts.append(more)
        data = b"".join(parts)
        if len(data) >= MAX_RECORD_SIZE:
            return Failure("record-too-large", f"{len(data):,} bytes; RecordIO stores < 2**29")
        return data
    finally:
        os.close(fd)


def _reencode(data: bytes, o: PackOptions) -> bytes | Failure:
    # Pillow is imported only when images are re-encoded: --pass-through
    # starts without it.
    from PIL import Image

    from .imaging import transcode

    try:
        with warnings.catch_warnings():
            # Pillow warns between its pixel limit and twice it; both are bombs here.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return transcode(
                data, color=o.color, resize=o.resize, center_crop=o.center_crop,
                img_fmt=o.encoding, quality=o.quality,
            )  # fmt: skip
    except ImageTooLargeError as exc:
        return Failure("output-too-large" if exc.output else "decompression-bomb", str(exc))
    except ImageCodecError as exc:
        return Failure("undecodable", str(exc))


_KEPT = "the partial output is kept: run the same command with --resume to continue"


class PackInterrupted(Im2RecError):
    """Ctrl-C: the partial output is kept for ``--resume``."""

    exit_code = 130


class DiskFullError(Im2RecError):
    """No space left while writing; the partial output is kept for ``--resume``."""


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

    def to_dict(self) -> dict[str, Any]:
        d = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(self).items()}
        d["failures"] = dict(self.failures)
        d["images_per_second"] = (
            (self.entries - self.resumed_from) / self.seconds if self.seconds else None
        )
        return d


def pack_list(
    lst: str | os.PathLike[str],
    options: PackOptions,
    *,
    root: str | os.PathLike[str] | None = None,
    executor: LocalExecutor | None = None,
    resume: bool = False,
    on_progress: Progress | None = None,
    overwrite: bool = True,
) -> PackResult:
    """Pack one ``.lst`` into ``.rec``/``.idx`` beside it (see module doc).
    With ``overwrite=False``, a finished ``.rec`` made from another version
    of the list, another root or other options (or not by im2rec) is a
    :class:`~im2rec.errors.DatasetError` instead of being replaced.
    Raises :class:`~im2rec.atomic.BusyError` while another process packs
    the same list."""
    files = PartialFiles(Path(lst))
    with exclusive(files.lst, "packing"):
        return _pack_list(files, options, root, executor, resume, on_progress, overwrite)


def _pack_list(
    files: PartialFiles,
    options: PackOptions,
    root: str | os.PathLike[str] | None,
    executor: LocalExecutor | None,
    resume: bool,
    on_progress: Progress | None,
    overwrite: bool,
) -> PackResult:
    items = read_lst(files.lst)
    if not items:
        raise DatasetError(f"{files.lst}: the list has no entries")
    root_dir = resolve_root(files.lst, root)
    state: dict[str, Any] = {
        "list_sha256": sha256_file(files.lst),
        "options": dataclasses.asdict(options),
        "root": str(root_dir.resolve()),
    }
    if not overwrite and not (resume and _partial_state(files) == state):
        # (a run that may replace it, --overwrite given, left this partial output)
        check_replaceable(files.rec, files.manifest, state, files.lst.name)
    # A partial output is newer than any finished one: it wins.
    encoder = Encoder(options, str(root_dir))

    def same(item: ListItem, record: bytes) -> bool:
        return _packs_to(encoder, item, record)

    if resume and not files.state.exists() and finished(files, state, items, same):
        return _result_from_manifest(files, items)
    start, keys, failures = recover(files, items, state, same) if resume else (0, [], Counter())
    discarded = files.rec_tmp.stat().st_size if not resume and files.rec_tmp.exists() else 0
    if not start:
        start_fresh(files, state)
    result = PackResult(
        files.lst, files.rec, files.idx, files.manifest, None, len(items), len(keys),
        failures, resumed_from=start, root=state["root"],
    )  # fmt: skip
    result.dropped_labels = 0 if options.pack_label else sum(len(i.labels) > 1 for i in items)
    result.discarded_partial = discarded
    writer = IndexedRecordWriter(
        files.rec, files.idx, temp=files.rec_tmp, idx_temp=files.idx_tmp,
        append=bool(start), hashing=True, check_keys=False,  # read_lst refused duplicates
    )  # fmt: skip
    if not options.pass_through:
        from . import imaging  # noqa: F401 - before a pool forks, so its workers inherit it
    t0 = time.perf_counter()
    with open(files.report_tmp, "a", encoding="utf-8", buffering=1) as report:
        _write_records(items, start, encoder, executor or LocalExecutor(1),
                       writer, report, result, on_progress)  # fmt: skip
    result.seconds = time.perf_counter() - t0
    _finish(files, writer, result, state)
    if not result.records and result.failures:
        # Nothing usable was made: no empty .rec that looks like a dataset,
        # only the failure report, and an error saying what likely went wrong.
        for path in (files.rec, files.idx, files.manifest):
            path.unlink(missing_ok=True)
        raise DatasetError(
            all_failed(
                result.lst,
                result.entries,
                result.failures,
                result.root,
                listed_in=result.failure_report,
            )  # fmt: skip
        )
    return result


def _partial_state(files: PartialFiles) -> Any:
    try:
        return read_json(files.state)
    except (OSError, ValueError):
        return None


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
    lst: Path,
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


def _packs_to(encoder: Encoder, item: ListItem, record: bytes) -> bool:
    """Whether ``record`` is byte for byte what ``item`` packs to now."""
    made = encoder(item)
    return not isinstance(made, Failure) and made.header + made.image == record


def resolve_root(lst: Path, root: str | os.PathLike[str] | None) -> Path:
    """The image root: ``root`` if given, else the one :func:`find_root` finds."""
    root_dir = Path(root) if root is not None else find_root(lst)
    if not root_dir.is_dir():
        raise MissingFileError(
            f"{root_dir}: image root not found (from --root); pass the folder that "
            "the list's paths are relative to"
        )
    return root_dir


def _write_records(
    items: Sequence[ListItem],
    start: int,
    encoder: Encoder,
    executor: LocalExecutor,
    writer: IndexedRecordWriter,
    report: Any,
    result: PackResult,
    on_progress: Progress | None,
) -> None:
    handled = start  # entries whose record or failure line is written
    # Pass-through only reads files: threads, which wait on I/O without the GIL.
    outcomes = executor.map_ordered(encoder, items[start:], io_bound=encoder.options.pass_through)
    try:
        for position, outcome in enumerate(outcomes, start):
            item = items[position]
            if isinstance(outcome, Failure):
                result.failures[outcome.reason] += 1
                # line-buffered, so no failure is lost when later records reach the disk
                report.write(f"{item.line}\t{item.key}\t{printable(item.path)}\t{outcome.reason}"
                             f"\t{printable(outcome.detail)}\n")  # fmt: skip
            else:
                writer.write_key(item.key, outcome.header, outcome.image, split=outcome.split)
                result.records += 1
            handled = position + 1
            if on_progress is not None:
                on_progress(position + 1, len(items), writer.tell())
        writer.close()
    except KeyboardInterrupt:
        writer.suspend()
        raise PackInterrupted(
            f"interrupted after {handled:,} of {len(items):,} entries of {result.lst}; {_KEPT}"
        ) from None
    except WorkerCrashed as exc:
        writer.suspend()
        raise WorkerCrashed(
            f"{result.lst}: a worker process died after {handled:,} of {len(items):,} entries "
            f"(killed, out of memory, or a crash while decoding an image); {_KEPT}"
        ) from exc
    except OSError as exc:
        writer.suspend()
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(
                f"disk full while writing {writer.temp_path.name} (about {writer.tell():,} bytes "
                "written); free some space, then run the same command with --resume to continue"
            ) from exc
        raise
    except BaseException:
        writer.suspend()
        raise


def _finish(
    files: PartialFiles, writer: IndexedRecordWriter, result: PackResult, state: dict[str, Any]
) -> None:
    result.bytes = files.rec.stat().st_size
    if result.failures:
        os.replace(files.report_tmp, files.report)
        result.failure_report = files.report
    else:
        files.report_tmp.unlink(missing_ok=True)
        files.report.unlink(missing_ok=True)
    manifest = {
        "im2rec": __version__,
        "list": {"path": files.lst.name, "sha256": state["list_sha256"], "entries": result.entries},
        "root": state["root"],
        "options": state["options"],
        "records": result.records,
        "failures": dict(result.failures),
        "rec": {"path": files.rec.name, "bytes": result.bytes, "sha256": writer.sha256()},
        "idx": {
            "path": files.idx.name,
            "bytes": files.idx.stat().st_size,
            "sha256": writer.index_sha256(),
        },
        "seconds": round(result.seconds, 3),
        "resumed_from": result.resumed_from,
    }
    with AtomicGroup() as group:
        group.write_text(files.manifest, json.dumps(manifest, indent=1) + "\n")
    files.state.unlink(missing_ok=True)


def _result_from_manifest(files: PartialFiles, items: list[ListItem]) -> PackResult:
    manifest = read_json(files.manifest)
    report = files.report if files.report.exists() else None
    return PackResult(
        files.lst, files.rec, files.idx, files.manifest, report, len(items), manifest["records"],
        Counter(manifest["failures"]), manifest["rec"]["bytes"], resumed_from=len(items),
        already_done=True, root=manifest["root"],
    )  # fmt: skip
