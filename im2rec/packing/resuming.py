"""Partial outputs of an interrupted pack, and picking them up again.

``NAME.rec.partial`` and ``NAME.idx.partial`` grow as records are written
(the ``.idx`` is flushed after the ``.rec``, so it never points past written
data); ``NAME.failures.tsv.partial`` gets one line per failed image as it
happens; ``NAME.rec.partial.json`` records the list's SHA-256, the root and
the options. :func:`recover` cuts the files back to the last record that is
complete and indexed, checks its header id and, by making it again from its
image, its bytes (a power loss can leave a file's tail zeroed rather than
cut: the header then reads fine over a payload of zeros), and returns where
to continue.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DatasetError, Im2RecError, ManifestError
from ..listing.lstfile import ListItem, ListStream
from ..recordio import frame, read_record, unpack
from ..recordio.manifests import MadeWith, load_pack_manifest, made_with
from ..storage.atomic import AtomicGroup, open_output, write_file
from ..storage.files import FileView, open_regular, pread, read_json

__all__ = [
    "REPORT_HEADER",
    "STATE_FORMAT",
    "PartialFiles",
    "check_replaceable",
    "finished",
    "manifest_matches",
    "read_state",
    "recover",
    "replaceable",
    "sha256_file",
    "start_fresh",
]

#: First line of a failure report (NAME.failures.tsv).
REPORT_HEADER = "line\tindex\tpath\treason\tdetail\n"


@dataclass(frozen=True)
class PartialFiles:
    """Every file one list's packing touches: ``NAME.lst`` and the files
    named after it (each a property, so that a misspelt one is a type
    error, not a file of another name)."""

    lst: Path

    def _beside(self, suffix: str) -> Path:
        return Path(f"{self.lst.with_suffix('')}{suffix}")

    @property
    def rec(self) -> Path:
        return self._beside(".rec")

    @property
    def idx(self) -> Path:
        return self._beside(".idx")

    @property
    def manifest(self) -> Path:
        return self._beside(".pack.json")

    @property
    def report(self) -> Path:
        """The failure report."""
        return self._beside(".failures.tsv")

    @property
    def rec_tmp(self) -> Path:
        return self._beside(".rec.partial")

    @property
    def idx_tmp(self) -> Path:
        return self._beside(".idx.partial")

    @property
    def state(self) -> Path:
        """What the partial files were made from (resume checks it)."""
        return self._beside(".rec.partial.json")

    @property
    def report_tmp(self) -> Path:
        return self._beside(".failures.tsv.partial")


def sha256_file(path: Path) -> str:
    """The SHA-256 of a regular file (anything else is refused at once)."""
    digest = hashlib.sha256()
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: the layout version of ``NAME.rec.partial.json`` (docs/format.md)
STATE_FORMAT = 1


def start_fresh(files: PartialFiles, state: MadeWith) -> None:
    for stale in (files.rec_tmp, files.idx_tmp):
        stale.unlink(missing_ok=True)
    with open_output(files.report_tmp) as report:
        report.write(REPORT_HEADER)
    with AtomicGroup() as group:
        text = json.dumps({"format": STATE_FORMAT, **state}, indent=1) + "\n"
        group.write_text(files.state, text)


def read_state(files: PartialFiles) -> object:
    """What ``NAME.rec.partial.json`` says the partial output was made from:
    a :class:`MadeWith` when it is one of this version's (compare it with
    ``==``), else whatever it holds, for :func:`differences` to explain.
    Raises ``OSError``/``ValueError`` when there is no readable file."""
    saved = read_json(files.state)
    if isinstance(saved, dict) and saved.get("format", 1) == STATE_FORMAT:
        saved.pop("format", None)  # (files of im2rec 0.1 have none)
    return saved


#: ``same(item, record)``: whether ``record`` is what packing ``item`` gives.
SameRecord = Callable[[ListItem, bytes], bool]


def finished(files: PartialFiles, state: MadeWith, items: ListStream, same: SameRecord) -> bool:
    """The final output exists and its manifest says it was made from this
    very list, root and options, with the sizes it has now, and its last
    record is what its image packs to (outputs are not synced to disk, and a
    power loss can zero a file's tail without changing its size)."""
    try:
        manifest = read_json(files.manifest)
        if not manifest_matches(
            manifest, state, files.rec.stat().st_size, files.idx.stat().st_size
        ):
            return False
    except (OSError, ValueError):
        return False
    count, last = _index_tail(files.idx)
    if not count:
        return files.rec.stat().st_size == 0
    key, offset, _ = last[-1]
    found = items.find(key)
    item = None if found is None else found[1]
    with _mapped(files.rec) as (buf, size):
        return _record_end(buf, size, str(files.rec), offset, item, same) == size


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[tuple[Any, int]]:
    """``(bytes read on demand, size)`` of a file (see :class:`FileView`)."""
    fd, size = open_regular(path)
    view = FileView(fd, size, str(path))
    try:
        yield view, size
    finally:
        view.close()


def _record_end(
    buf: Any, size: int, name: str, offset: int, item: ListItem | None, same: SameRecord
) -> int | None:
    """Where the record of ``item`` at ``offset`` ends if it is whole: it
    reads, its header id is the item's key, its frame is the one written
    (zero padding, the same split) and ``same`` makes it again from its
    image; else None."""
    try:
        record, end = read_record(buf, offset, size, name)
        whole = (
            item is not None
            and unpack(record)[0].id == item.key
            and buf[offset:end] == frame(record)
            and same(item, bytes(record))
        )
    except Im2RecError:
        return None
    return end if whole else None


def recover(
    files: PartialFiles, items: ListStream, state: MadeWith, same: SameRecord
) -> tuple[int, int, Counter[str]]:
    """Cut the partial output back to its last whole record (see
    :func:`_record_end`; earlier ones were written before it, so a torn
    tail cannot reach them); return the list position to continue from, the
    number of records kept, and the failures so far. Memory does not grow
    with the list: only the last lines of the partial ``.idx`` are held, and
    the list is read again to find an entry."""
    try:
        saved = read_state(files)
    except (OSError, ValueError):
        return 0, 0, Counter()  # nothing (readable) to resume: start over
    if saved != state:
        why = differences(saved, state, files.lst.name)
        raise DatasetError(
            f"{files.rec_tmp}: the partial output was made {why}; run again with those, or "
            "with --overwrite instead of --resume to start over"
        )
    if not files.rec_tmp.exists() or not files.idx_tmp.exists():
        return 0, 0, Counter()
    count, last = _index_tail(files.idx_tmp)
    keep, rec_end, position = count, None, -1
    with _mapped(files.rec_tmp) as (buf, size):
        while last and rec_end is None:
            key, offset, _ = last[-1]
            found = items.find(key)
            if found is not None:
                position = found[0]
                rec_end = _record_end(buf, size, str(files.rec_tmp), offset, found[1], same)
            if rec_end is None:
                last.pop()
                keep -= 1
    if rec_end is None:  # none of the last lines is whole: start over
        keep = 0
    os.truncate(files.rec_tmp, rec_end or 0)
    os.truncate(files.idx_tmp, last[-1][2] if keep else 0)
    start = position + 1 if keep else 0
    start, failures = _cut_report(files.report_tmp, items, start)
    return start, keep, failures


def differences(saved: object, state: MadeWith, lst: str) -> str:
    """What differs between the run that made a partial output and this one,
    with both values: ``"with --resize 256 (now 0)"``."""
    if not isinstance(saved, dict):
        return "by another version of im2rec"
    if saved.get("format", 1) != STATE_FORMAT:
        return f"by another version of im2rec (state format {saved.get('format')})"
    out = []
    if saved.get("list_sha256") != state["list_sha256"]:
        out.append(f"from another version of {lst} (it changed since)")
    if saved.get("root") != state["root"]:
        out.append(f"with the images in {saved.get('root')} (now {state['root']})")
    options = saved.get("options")
    before: dict[str, Any] = options if isinstance(options, dict) else {}
    now_options = {"layout": "plain", **state["options"]}  # (unnamed when plain)
    before = {"layout": "plain", **before}
    for name, now in now_options.items():
        was = before.get(name)
        if was == now:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(now, bool) and isinstance(was, bool):
            out.append(
                f"{'with' if was else 'without'} {flag} (now {'with' if now else 'without'})"
            )
        else:
            out.append(f"with {flag} {was} (now {now})")
    return ", ".join(out) or "by another version of im2rec"


def manifest_matches(
    found: object, state: MadeWith, rec_size: int | None, idx_size: int | None
) -> bool:
    """Whether ``found`` (a parsed ``NAME.pack.json``) is a pack manifest
    that says its output was made from this very list, root and options
    (``state``) and records the sizes the files have now (``None``: the
    file is missing)."""
    try:
        manifest = load_pack_manifest(found, "manifest")
    except ManifestError:
        return False
    return (
        made_with(manifest) == state
        and manifest["rec"]["bytes"] == rec_size
        and manifest["idx"]["bytes"] == idx_size
    )


def check_replaceable(
    rec: Path, manifest_path: Path, state: MadeWith, lst: str, what: str = "it"
) -> None:
    """Refuse to replace a finished ``rec`` unless it was made from this very
    list, root and options and is unchanged since (then packing again makes
    the same bytes): overwriting a dataset packed otherwise (another
    --resize, another version of the list, or not by rec pack at all) loses
    work that may have taken hours. ``--overwrite`` skips this check."""
    if rec.exists():
        replaceable(str(rec), rec.stat().st_size, _manifest(manifest_path), state, lst, what)


def _manifest(path: Path) -> object:
    try:
        return read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def replaceable(
    rec: str,
    size_now: int,
    found: object,
    state: MadeWith,
    lst: str,
    what: str = "it",
) -> None:
    """:func:`check_replaceable` of the existing ``rec`` (a path or a URL) of
    ``size_now`` bytes, whose manifest is ``found`` (None when there is none,
    ``{}`` when it is unreadable)."""
    name = rec.rsplit("/", 1)[-1]
    manifest_name = name.rsplit(".", 1)[0] + ".pack.json"
    advice = f"pass --overwrite to replace {what}, or move {name} away first"
    if found is None:
        raise DatasetError(
            f"{rec}: already exists, and not from rec pack (no {manifest_name} beside it); {advice}"
        )
    try:
        manifest = load_pack_manifest(found, manifest_name)
    except ManifestError as exc:
        raise DatasetError(f"{rec}: already exists and {exc}; {advice}") from None
    saved, size = made_with(manifest), manifest["rec"]["bytes"]
    if saved != state:
        why = differences(saved, state, lst)
        was = saved.get("options") if isinstance(saved, dict) else None
        if (
            isinstance(was, dict)
            and was.get("pack_label")
            and not state["options"].get("pack_label")
        ):
            advice = (  # (--overwrite would pack it again with each line's first label only)
                f"run again with --pack-label to keep every label of each line ({name} holds "
                f"them: a detection rec its boxes); --overwrite would replace it with the "
                "first label only"
            )
        raise DatasetError(f"{rec}: already packed {why}; {advice}")
    if size != size_now:
        raise DatasetError(
            f"{rec}: changed since it was packed ({size_now:,} bytes, "
            f"{manifest_name} says {size:,}); {advice}"
        )


#: the last lines of a partial .idx kept for the search back to a whole record
_TAIL = 256


def _index_tail(idx: Path) -> tuple[int, list[tuple[int, int, int]]]:
    """How many whole, well-formed lines a (partial) ``.idx`` starts with,
    and ``(key, offset, end of line)`` of the last :data:`_TAIL` of them:
    read a block at a time (a torn write leaves at most the end broken)."""
    from collections import deque

    count = 0
    tail: deque[tuple[int, int, int]] = deque(maxlen=_TAIL)
    fd, size = open_regular(idx)
    try:
        at, rest = 0, b""
        while at < size:
            block = rest + pread(fd, min(1 << 20, size - at), at)
            if len(block) == len(rest):
                break
            base = at - len(rest)
            at += len(block) - len(rest)
            pos = 0
            while (nl := block.find(b"\n", pos)) != -1:
                try:
                    key, offset = (int(v) for v in block[pos:nl].split(b"\t"))
                except ValueError:
                    return count, list(tail)
                pos = nl + 1
                count += 1
                tail.append((key, offset, base + pos))
            rest = block[pos:]
    finally:
        os.close(fd)
    return count, list(tail)


def _cut_report(report: Path, items: ListStream, start: int) -> tuple[int, Counter[str]]:
    """Keep the failures logged before the resume point, and those of the
    entries right after it (failures are logged as they happen, so entries
    that failed after the last whole record need not be tried again: the
    position agrees with the interrupted run's count); drop the rest (they
    will be tried again). Returns the position to continue from and the
    failures kept."""
    failures: Counter[str] = Counter()
    try:
        raw = report.read_bytes().split(b"\n")
    except OSError:
        raw = []
    kept = [REPORT_HEADER]
    following = items.from_position(start)  # (read as far as the failures reach)
    next_item = next(following, None)
    for i in range(1, len(raw) - 1):  # the piece after the last newline is no whole line
        try:
            line = raw[i].decode("utf-8") + "\n"
        except UnicodeDecodeError:  # a torn write: keep what came before
            break
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 5 or not (fields[0].isascii() and fields[0].isdigit()):
            break
        if next_item is not None and int(fields[0]) >= next_item.line:
            if int(fields[0]) != next_item.line:
                break  # an entry after the resume point did not fail: redo from there
            start += 1
            next_item = next(following, None)
        kept.append(line)
        failures[fields[3]] += 1
    write_file(report, "".join(kept))
    return start, failures
