"""Packing one list: its state, the partial files, the ordered writing of
records (images fetched ahead when they are in a store), the manifest."""

from __future__ import annotations

import errno
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import (
    DatasetError,
    MissingFileError,
)
from ..executors import LocalExecutor, WorkerCrashed
from ..listing.finding import find_root
from ..listing.lstfile import ListItem, ListStream, printable
from ..recordio import IndexedRecordWriter
from ..recordio.manifests import PACK_FORMAT, MadeWith, PackManifest, dump, load_pack_manifest
from ..storage import is_url
from ..storage.atomic import AtomicGroup, open_output
from ..storage.files import read_json
from ..version import __version__
from .encoding import Encoder, Failure, Packed, PackOptions
from .outcome import (
    KEPT,
    DiskFullError,
    PackInterrupted,
    PackResult,
    all_failed,
    result_from_manifest,
)
from .resuming import (
    PartialFiles,
    check_replaceable,
    finished,
    read_state,
    recover,
    sha256_file,
    start_fresh,
)

Progress = Callable[[int, int, int], None]  # (entries done, entries, bytes written)


@dataclass(frozen=True)
class PackRun:
    """How one list is packed: :func:`pack_list`'s arguments beside the list,
    handed down unchanged to the layout and store variants."""

    options: PackOptions
    root: str | os.PathLike[str] | None = None
    executor: LocalExecutor | None = None
    resume: bool = False
    on_progress: Progress | None = None
    overwrite: bool = True


def run_state(
    files: PartialFiles, options: PackOptions, root: str | os.PathLike[str] | None
) -> MadeWith:
    """What a run is made from (see :mod:`.resuming`): the list's SHA-256,
    the options and the image root (absolute, or a URL)."""
    return {
        "list_sha256": sha256_file(files.lst),
        "options": options.as_state(),
        "root": resolve_root(files.lst, root),
    }


def pack_plain(files: PartialFiles, run: PackRun) -> PackResult:
    """:func:`~im2rec.packing.pack_list` of a local list in the plain layout,
    the caller holding its lock."""
    options, resume = run.options, run.resume
    # the list checked, then read again as it is packed: nothing a line is held
    items = ListStream.scan(files.lst)
    if not items:
        raise DatasetError(f"{files.lst}: the list has no entries")
    state = run_state(files, options, run.root)
    root_s = state["root"]
    if not run.overwrite and not (resume and _partial_state(files) == state):
        # (a run that may replace it, --overwrite given, left this partial output)
        check_replaceable(files.rec, files.manifest, state, files.lst.name)
    # A partial output is newer than any finished one: it wins.
    encoder = Encoder(options, root_s)

    def same(item: ListItem, record: bytes) -> bool:
        return _packs_to(encoder, item, record)

    if resume and not files.state.exists() and finished(files, state, items, same):
        return result_from_manifest(
            files, items, load_pack_manifest(read_json(files.manifest), str(files.manifest))
        )
    start, written, failures = recover(files, items, state, same) if resume else (0, 0, Counter())
    discarded = files.rec_tmp.stat().st_size if not resume and files.rec_tmp.exists() else 0
    if not start:
        start_fresh(files, state)
    result = PackResult(
        files.lst, files.rec, files.idx, files.manifest, None, len(items), written,
        failures, resumed_from=start, root=state["root"],
    )  # fmt: skip
    result.dropped_labels = 0 if options.pack_label else items.multi_label
    result.discarded_partial = discarded
    writer = IndexedRecordWriter(
        files.rec, files.idx, temp=files.rec_tmp, idx_temp=files.idx_tmp,
        append=bool(start), hashing=True, check_keys=False,  # read_lst refused duplicates
    )  # fmt: skip
    if not options.pass_through:
        from ..imaging import codec as imaging  # noqa: F401 - before a pool forks, so its workers inherit it
    t0 = time.perf_counter()
    with open_output(files.report_tmp, append=True) as report:
        _write_records(items, start, encoder, run.executor or LocalExecutor(1),
                       writer, report, result, run.on_progress)  # fmt: skip
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


def _partial_state(files: PartialFiles) -> object:
    try:
        return read_state(files)
    except (OSError, ValueError):
        return None


def _packs_to(encoder: Encoder, item: ListItem, record: bytes) -> bool:
    """Whether ``record`` is byte for byte what ``item`` packs to now."""
    made = encoder(item)
    return not isinstance(made, Failure) and made.header + made.image == record


def resolve_root(lst: Path, root: str | os.PathLike[str] | None) -> str:
    """The image root, absolute (or a URL): ``root`` if given, else the one
    :func:`find_root` finds."""
    if root is not None and is_url(root):
        return _remote_root(os.fspath(root))
    root_dir = Path(root) if root is not None else find_root(lst)
    if not root_dir.is_dir():
        raise MissingFileError(
            f"{root_dir}: image root not found (from --root); pass the folder that "
            "the list's paths are relative to"
        )
    return str(root_dir.resolve())


def _remote_root(url: str) -> str:
    from ..storage.objects import list_names

    url = url.rstrip("/")
    if not list_names(url):
        raise MissingFileError(
            f"{url}: no objects under this image root (from --root); pass the prefix that "
            "the list's paths are relative to"
        )
    return url


#: Images read from a store at once: requests wait on the network, not a CPU.
FETCHERS = 32


def _write_records(
    items: ListStream,
    start: int,
    encoder: Encoder,
    executor: LocalExecutor,
    writer: IndexedRecordWriter,
    report: Any,
    result: PackResult,
    on_progress: Progress | None,
) -> None:
    # Pass-through only reads files: threads, which wait on I/O without the GIL.
    io_bound = encoder.options.pass_through
    # One read of the list, shared (tee keeps only the entries between the
    # workers' feed and the writer: the executor's window of them).
    with LocalExecutor(FETCHERS // 2 if is_url(encoder.root) else 0) as fetcher:
        if fetcher.workers:  # from a store: many requests in flight, encoding in the pool
            fed, paired, written = itertools.tee(items.from_position(start), 3)
            read = fetcher.map_ordered(encoder.read, fed, io_bound=True)
            pairs = zip(paired, read, strict=True)
            outcomes = executor.map_ordered(encoder.encode_read, pairs, io_bound=io_bound)
        else:
            fed, written = itertools.tee(items.from_position(start), 2)
            outcomes = executor.map_ordered(encoder, fed, io_bound=io_bound)
        _write_outcomes(written, len(items), start, outcomes, writer, report, result,
                        on_progress)  # fmt: skip


def _write_outcomes(
    items: Iterator[ListItem],
    total: int,
    start: int,
    outcomes: Iterator[Packed | Failure],
    writer: IndexedRecordWriter,
    report: Any,
    result: PackResult,
    on_progress: Progress | None,
) -> None:
    handled = start  # entries whose record or failure line is written
    try:
        for position, (item, outcome) in enumerate(zip(items, outcomes, strict=True), start):
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
                on_progress(position + 1, total, writer.tell())
        writer.close()
    except KeyboardInterrupt:
        writer.suspend()
        raise PackInterrupted(
            f"interrupted after {handled:,} of {total:,} entries of {result.lst}; {KEPT}"
        ) from None
    except WorkerCrashed as exc:
        writer.suspend()
        raise WorkerCrashed(
            f"{result.lst}: a worker process died after {handled:,} of {total:,} entries "
            f"(killed, out of memory, or a crash while decoding an image); {KEPT}"
        ) from exc
    except OSError as exc:
        writer.suspend()
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(
                f"disk full while writing {writer.temp_path.name} (about {writer.tell():,} bytes "
                "written); free some space, then run the same command with --resume to continue"
            ) from exc
        if exc.errno == errno.EFBIG:
            size = writer.temp_path.stat().st_size  # where the file system stopped it
            raise DiskFullError(
                f"{writer.temp_path.name} may grow no larger than {size:,} bytes "
                "(the file system's largest file, or the file-size limit `ulimit -f` sets): "
                "raise the limit and run the same command with --resume to continue, or "
                "start over with --shards N to write smaller files"
            ) from exc
        raise
    except BaseException:
        writer.suspend()
        raise


def _finish(
    files: PartialFiles, writer: IndexedRecordWriter, result: PackResult, state: MadeWith
) -> None:
    result.bytes = files.rec.stat().st_size
    if result.failures:
        os.replace(files.report_tmp, files.report)
        result.failure_report = files.report
    else:
        files.report_tmp.unlink(missing_ok=True)
        files.report.unlink(missing_ok=True)
    write_manifest(files, result, state, writer.sha256(), writer.index_sha256())
    files.state.unlink(missing_ok=True)


def write_manifest(
    files: PartialFiles,
    result: PackResult,
    state: MadeWith,
    rec_sha256: str,
    idx_sha256: str,
    *,
    identities: int | None = None,
) -> None:
    """``NAME.pack.json`` (:class:`~im2rec.recordio.manifests.PackManifest`):
    what the finished output was made from, its counts, sizes and SHA-256s
    (written last: the output is complete). ``identities``: the face
    layout's."""
    manifest: PackManifest = {
        "format": PACK_FORMAT,
        "im2rec": __version__,
        "list": {"path": files.lst.name, "sha256": state["list_sha256"], "entries": result.entries},
        "root": state["root"],
        "options": state["options"],
        "records": result.records,
        "failures": dict(result.failures),
        "rec": {"path": files.rec.name, "bytes": result.bytes, "sha256": rec_sha256},
        "idx": {"path": files.idx.name, "bytes": files.idx.stat().st_size, "sha256": idx_sha256},
        "seconds": round(result.seconds, 3),
        "resumed_from": result.resumed_from,
    }
    if identities is not None:
        manifest["layout"] = "insightface"
        manifest["identities"] = identities
    with AtomicGroup() as group:
        group.write_text(files.manifest, dump(manifest))
