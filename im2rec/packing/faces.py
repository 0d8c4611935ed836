"""``rec pack --layout insightface``: a list of identity-labelled images to
InsightFace's face layout (see :mod:`.insightface`).

Two steps, so that everything a plain pack promises holds: the entries,
grouped by identity, are packed as a plain pack of a hidden staging list
``.NAME.insightface.lst`` beside the list (with its partial files,
``--resume`` and failure report); then its records are renumbered into the
layout, with the header and identity records, into ``NAME.rec``/``.idx``
(written atomically), and ``NAME.pack.json`` is written last. The staging
files go once the layout is written; a run stopped in either step continues
with ``--resume``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ..errors import DatasetError, Im2RecError
from ..formats.insightface import identity_of_label, write_faces, write_property
from ..recordio import RecordReader, unpack
from ..recordio.manifests import MadeWith, load_pack_manifest
from ..storage.atomic import AtomicGroup, write_file
from ..storage.files import open_regular, read_json
from .faces_plan import IdentityPlan, plan_identities
from .outcome import PackResult, result_from_manifest
from .pipeline import PackRun, pack_plain, run_state, write_manifest
from .resuming import PartialFiles, check_replaceable, manifest_matches

__all__ = ["pack_faces"]


def staging_files(files: PartialFiles) -> PartialFiles:
    return PartialFiles(files.lst.with_name(f".{files.lst.stem}.insightface.lst"))


def pack_faces(files: PartialFiles, run: PackRun) -> PackResult:
    """Pack ``files.lst`` into the face layout (see the module doc)."""
    resume = run.resume
    plan = plan_identities(files.lst)
    if not plan.count:
        raise DatasetError(f"{files.lst}: the list has no entries")
    state = run_state(files, run.options, run.root)
    stage = staging_files(files)
    if resume and not stage.lst.exists() and _finished(files, state):
        manifest = load_pack_manifest(read_json(files.manifest), str(files.manifest))
        result = result_from_manifest(files, range(plan.count), manifest)
        result.identities = manifest.get("identities")
        return result
    if not run.overwrite and not (resume and stage.lst.exists()):
        check_replaceable(files.rec, files.manifest, state, files.lst.name)
    _stage_list(plan, stage.lst)
    plain = dataclasses.replace(run.options, layout="plain")
    try:
        staged = pack_plain(
            stage, dataclasses.replace(run, options=plain, root=state["root"], overwrite=True)
        )
    except Im2RecError as exc:  # name the user's list, not the staging one
        raise type(exc)(str(exc).replace(str(stage.lst), str(files.lst))) from exc
    t0 = time.perf_counter()
    counts = write_faces(_identities(staged.rec), files.rec, files.idx, str(files.lst))
    write_property(files.rec, counts, overwrite=run.overwrite)
    result = PackResult(
        files.lst, files.rec, files.idx, files.manifest, None, plan.count, counts.images,
        staged.failures, files.rec.stat().st_size, staged.seconds + time.perf_counter() - t0,
        resumed_from=staged.resumed_from, root=state["root"],
    )  # fmt: skip
    result.identities = counts.identities
    result.property, result.property_note = counts.property, counts.property_note
    result.dropped_labels = staged.dropped_labels
    result.discarded_partial = staged.discarded_partial
    _move_report(staged.failure_report, files, plan, result)
    write_manifest(
        files, result, state, counts.rec_sha256, counts.idx_sha256, identities=counts.identities,
    )  # fmt: skip
    for path in (stage.lst, stage.rec, stage.idx, stage.manifest, stage.report):
        path.unlink(missing_ok=True)
    return result


def _stage_list(plan: IdentityPlan, path: Path) -> None:
    """The staging list, grouped by identity; one a --resume continues is
    kept when it is the same text (compared by hash: neither is held)."""
    import hashlib

    if path.exists():
        made, there = hashlib.sha256(), hashlib.sha256()
        for piece in plan.grouped_text():
            made.update(piece)
        fd, _ = open_regular(path)  # (a FIFO planted there would never end)
        with os.fdopen(fd, "rb") as f:
            while block := f.read(1 << 20):
                there.update(block)
        if made.digest() == there.digest():
            return
    with AtomicGroup() as group, group.open(path) as f:
        for piece in plan.grouped_text():
            f.write(piece)


def _finished(files: PartialFiles, state: MadeWith) -> bool:
    """The layout was written from this very list, root and options, and has
    the sizes its manifest records."""
    try:
        return manifest_matches(
            read_json(files.manifest), state, files.rec.stat().st_size, files.idx.stat().st_size
        )
    except (OSError, ValueError):
        return False


def _identities(rec: Path) -> Iterator[tuple[int, bytes]]:
    """``(identity, image)`` of each record of the staged plain pack."""
    reader = RecordReader(rec)
    try:
        for record in reader:
            header, image = unpack(record)
            identity = identity_of_label(header.label)
            assert identity is not None  # plan_identities checked every label
            yield identity, bytes(image)
    finally:
        reader.close()


def _move_report(
    report: Path | None, files: PartialFiles, plan: IdentityPlan, result: PackResult
) -> None:
    """The staging pack's failure report as ``NAME.failures.tsv``, its line
    numbers those of the user's list."""
    if report is None:
        files.report.unlink(missing_ok=True)
        return
    lines = report.read_text(encoding="utf-8").splitlines(keepends=True)
    rows = [line.split("\t", 1) for line in lines[1:]]  # (staging line, the rest)
    user = plan.user_lines(int(number) for number, _ in rows)
    out = [lines[0]]
    out += [f"{user[int(number)]}\t{rest}" for number, rest in rows]
    write_file(files.report, "".join(out))
    report.unlink()
    result.failure_report = files.report
    result.failures = Counter(result.failures)
