"""Image folders to ``.lst`` files, the way ``im2rec.py --list`` makes them.

Facts in docs/format.md, "im2rec.py, Listing". In short, for the same folder and options the entries
(index, label, path) and their order equal im2rec.py's:

* **Walk.** Non-recursive: the root's files, sorted by name, all label 0.
  Recursive: ``os.walk`` top-down with folders and files sorted by code point,
  files of a folder before its subfolders; a folder gets the next label when
  its first image is listed (the root too), so empty folders get none and
  nested folders get their own. A file is an image when its lower-cased
  ``os.path.splitext`` suffix is one of the extensions and it is a regular
  file (links followed). Index = position in this walk, before shuffling.
* **Shuffle.** ``random.Random(100).shuffle`` of the whole list, which is
  what ``random.seed(100); random.shuffle(...)`` does.
* **Chunks and splits.** ``chunk_size = ceil(N / chunks)``; in each chunk
  ``int(chunk_size * ratio)`` entries go to test, then train, the rest to
  val; the ``.lst`` labels are written as ``%f`` like im2rec.py 1.9.1.

Where im2rec.py wrote a broken list or looped forever, we stop or skip with a
reason instead: names that a ``.lst`` line cannot carry are skipped (and
reported), symlink loops and unreadable folders are errors.
"""

from __future__ import annotations

import contextlib
import os
import random
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DatasetError, MissingFileError
from ..progress import with_progress
from ..storage import is_url, read_bytes, write_bytes
from ..storage.atomic import AtomicGroup
from ..storage.files import parse_json, read_json
from .classmap import class_map_text
from .entries import BoxEntries, Entry, EntryView, labels_of, shuffle_positions
from .lstfile import box_lst_pieces, lst_pieces, printable
from .records import LISTS_FORMAT, ListsRecord, dump, load_lists_record
from .splits import relabel, scan_splits, split_folders
from .walking import (
    DEFAULT_EXTS,
    IM2REC_SEED,
    ListOptions,
    Progress,
    Scan,
    label_counts,
    scan_folder,
)

if TYPE_CHECKING:
    from .boxes import BoxOptions

__all__ = [
    "DEFAULT_EXTS",
    "IM2REC_SEED",
    "Entry",
    "ListOptions",
    "ListResult",
    "Scan",
    "make_lists",
    "plan_lists",
    "scan_folder",
]


def plan_lists(entries: Sequence[Entry], options: ListOptions) -> list[tuple[str, Sequence[Entry]]]:
    """Shuffle, chunk and split: ``[(name suffix, entries), ...]`` in the
    order im2rec.py writes the files (``_test``, ``_val``, ``_train`` per chunk).
    Positions are shuffled and cut, 8 bytes an entry; the lists are views."""
    if options.chunks > max(1, len(entries)):
        # (im2rec.py would write an empty list per chunk past the last image:
        # a billion of them for --chunks 1000000000)
        raise ConfigError(
            f"--chunks {options.chunks:,} is more than the {len(entries):,} images found; each "
            "chunk past the last image would be an empty list: ask for at most that many"
        )
    order = array("q", range(len(entries)))
    if options.shuffle:
        shuffle_positions(order, random.Random(options.seed))
    chunk_size = (len(order) + options.chunks - 1) // options.chunks
    train_r, test_r = options.train_ratio, options.test_ratio
    out: list[tuple[str, Sequence[Entry]]] = []
    for c in range(options.chunks):
        chunk = order[c * chunk_size : (c + 1) * chunk_size]
        tag = f"_{c}" if options.chunks > 1 else ""
        if train_r == 1.0:
            out.append((tag, EntryView(entries, chunk)))
            continue
        if options.stratify:
            test, train, val = _stratified(labels_of(entries, chunk), chunk, train_r, test_r)
        else:
            # im2rec.py sizes every chunk's splits from chunk_size, not len(chunk)
            sep, sep_test = int(chunk_size * train_r), int(chunk_size * test_r)
            test, train, val = (
                chunk[:sep_test],
                chunk[sep_test : sep_test + sep],
                chunk[sep_test + sep :],
            )
        if test_r:
            out.append((f"{tag}_test", EntryView(entries, test)))
        if train_r + test_r < 1.0:
            out.append((f"{tag}_val", EntryView(entries, val)))
        out.append((f"{tag}_train", EntryView(entries, train)))
    return out


def _stratified(
    labels: list[int], chunk: array[int], train_r: float, test_r: float
) -> tuple[array[int], array[int], array[int]]:
    """Split each class of the chunk in the given proportions (rounded to
    the nearest image), keeping the chunk's order inside every split."""
    by_class: dict[int, list[int]] = {}
    for pos, label in enumerate(labels):
        by_class.setdefault(label, []).append(pos)
    split_of = bytearray(len(chunk))  # 0 test, 1 train, 2 val
    for positions in by_class.values():
        n = len(positions)
        n_test = min(n, int(n * test_r + 0.5))
        n_train = n - n_test if train_r + test_r >= 1.0 else min(n - n_test, int(n * train_r + 0.5))
        for rank, pos in enumerate(positions):
            split_of[pos] = 0 if rank < n_test else 1 if rank < n_test + n_train else 2
    parts = (array("q"), array("q"), array("q"))
    for p, s in zip(chunk, split_of, strict=True):
        parts[s].append(p)
    return parts


def summary(scan: Scan, lists: list[tuple[str, int]]) -> dict[str, Any]:
    if isinstance(scan.entries, BoxEntries):  # images holding the class, and its objects
        counts, objects = scan.entries.counts()
        classes = [
            {"label": label, "name": name, "images": counts[label], "objects": objects[label]}
            for label, name in enumerate(scan.classes)
        ]
    else:
        counts = label_counts(scan.entries)
        classes = [
            {"label": label, "folder": folder, "images": counts[label]}
            for label, folder in enumerate(scan.classes)
        ]
    return {
        "root": scan.root if is_url(scan.root) else os.path.abspath(scan.root),
        "images": len(scan.entries),
        "classes": classes,
        "lists": [{"path": path, "images": n} for path, n in lists],
        "skipped": {reason: len(paths) for reason, paths in scan.skipped.items()},
        "passed_over": dict(scan.passed),
    }


@dataclass(frozen=True)
class ListResult:
    """What :func:`make_lists` wrote; ``splits``: ``(folder, split)`` of a
    pre-split root (:mod:`.splits`), listed split by split."""

    scan: Scan
    lists: list[tuple[str, int]]  # (path, images)
    class_map: str
    manifest: str
    skipped_report: str | None
    splits: list[tuple[str, str]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **summary(self.scan, self.lists),
            "class_map": self.class_map,
            "manifest": self.manifest,
            "skipped_report": self.skipped_report,
            "splits": None if self.splits is None else dict(self.splits),
        }


@with_progress("listing", " images", done=1)
def make_lists(
    root: str | os.PathLike[str],
    prefix: str | os.PathLike[str],
    options: ListOptions,
    *,
    strict: bool = False,
    on_progress: Progress | None = None,
    progress: bool = False,
    boxes: BoxOptions | None = None,
) -> ListResult:
    """Scan ``root`` and write ``PREFIX*.lst``, ``PREFIX.classes.tsv``,
    ``PREFIX.lists.json`` (and ``PREFIX.skipped.tsv`` when files were
    skipped), all or nothing. Lists a previous run recorded in
    ``PREFIX.lists.json`` that this run does not write are removed, so a
    later ``rec pack PREFIX`` cannot pick up stale ones. With ``boxes``,
    ``root`` is an annotation set (:mod:`.boxes`) and the lists are
    detection lists."""
    splits = None
    parts: list[tuple[str, array[int]]] = []
    if boxes is not None:
        from .boxes import read_boxes  # (numpy: only for annotation sets)

        scan = read_boxes(os.fspath(root), boxes)
    elif (
        options.recursive and options.splits and (splits := split_folders(os.fspath(root), options))
    ):
        _refuse_ratios(options, splits)
        scan, parts = scan_splits(os.fspath(root), options, splits, on_progress)
    else:
        scan = scan_folder(root, options, on_progress)
        if options.classes is not None:
            scan = relabel(scan, options.classes)
    if strict and scan.skipped:
        counts = ", ".join(f"{len(paths)} {reason}" for reason, paths in scan.skipped.items())
        raise DatasetError(f"{scan.root}: {counts}; nothing written (--strict)")
    prefix_s = os.fspath(prefix)
    remote = is_url(prefix_s)
    names = {kind: f"{prefix_s}.{kind}" for kind in ("classes.tsv", "lists.json", "skipped.tsv")}
    if not remote:
        os.makedirs(os.path.dirname(prefix_s) or ".", exist_ok=True)
    stale = _previous_lists(names["lists.json"], prefix_s)
    lists: list[tuple[str, int]] = []
    texts: list[tuple[str, str]] = []  # (path, content), the run record last
    label_texts = [f"{label:f}" for label in range(len(scan.classes))]
    found = scan.entries

    def pieces(entries: Sequence[Entry]) -> Iterator[str]:
        if isinstance(found, BoxEntries):  # (a view of them: keys are positions)
            assert isinstance(entries, EntryView) and entries.viewed is found
            return box_lst_pieces(entries.positions, found.paths_at, found.spans)
        return lst_pieces(entries, label_texts)

    planned = plan_lists(scan.entries, options) if not parts else _split_lists(scan, parts, options)
    for suffix, entries in planned:
        lists.append((f"{prefix_s}{suffix}.lst", len(entries)))
    texts.append((names["classes.tsv"], class_map_text(scan.classes)))
    report = names["skipped.tsv"] if scan.skipped else None
    if report:
        rows = (f"{r}\t{printable(p)}\n" for r, paths in scan.skipped.items() for p in paths)
        texts.append((report, "".join(rows)))
    result = ListResult(scan, lists, names["classes.tsv"], names["lists.json"], report, splits)
    done = result.to_dict()
    record: ListsRecord = {
        "format": LISTS_FORMAT, "root": done["root"], "images": done["images"],
        "classes": done["classes"], "lists": done["lists"], "skipped": done["skipped"],
        "class_map": done["class_map"], "manifest": done["manifest"],
        "skipped_report": done["skipped_report"],
        "options": {**_options_dict(options), **({"boxes": vars(boxes)} if boxes else {})},
    }  # fmt: skip
    texts.append((names["lists.json"], dump(record)))
    if remote:  # each object appears whole; the run record last
        for (path, _), (_, entries) in zip(lists, planned, strict=True):
            write_bytes(path, "".join(pieces(entries)).encode("utf-8"))
        for path, text in texts:
            write_bytes(path, text.encode("utf-8"))
    else:
        with AtomicGroup() as group:
            for (path, _), (_, entries) in zip(lists, planned, strict=True):
                with group.open(path) as f:  # a piece at a time: the text is never whole
                    for piece in pieces(entries):
                        f.write(piece.encode("utf-8"))
            for path, text in texts:
                group.write_text(path, text)
    for path in stale - {p for p, _ in lists} - ({report} if report else set()):
        if remote:
            from ..storage.objects import remove

            remove(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return result


def _refuse_ratios(options: ListOptions, splits: list[tuple[str, str]]) -> None:
    """The options that cut one list into splits, for a root whose folders
    are the splits already: refused, saying what to do."""
    cutting = [name for name, on in (
        ("--train-ratio", options.train_ratio != 1.0), ("--test-ratio", options.test_ratio != 0.0),
        ("--chunks", options.chunks != 1), ("--stratify", options.stratify),
        ("--min-per-class", options.min_per_class != 0),
    ) if on]  # fmt: skip
    if cutting:
        folders = ", ".join(f"{folder}/" for folder, _ in splits)
        raise ConfigError(
            f"{' and '.join(cutting)} cut one list, and this root's folders ({folders}) are "
            "its splits already: drop the option, or pass --no-splits to list the root as "
            "one tree"
        )


def _split_lists(
    scan: Scan, parts: list[tuple[str, array[int]]], options: ListOptions
) -> list[tuple[str, Sequence[Entry]]]:
    """A pre-split root's lists: ``_train``, ``_val``, ``_test``, each
    shuffled as a list of its own (im2rec.py's shuffle, the same seed)."""
    out: list[tuple[str, Sequence[Entry]]] = []
    for split, positions in parts:
        if options.shuffle:
            shuffle_positions(positions, random.Random(options.seed))
        out.append((f"_{split}", EntryView(scan.entries, positions)))
    return out


def _previous_lists(manifest: str, prefix: str) -> set[str]:
    """The lists (and skipped report) a previous run recorded in ``manifest``:
    only ``PREFIX*.lst`` and ``PREFIX.skipped.tsv`` beside it, whatever else
    the file names (it may be someone else's), are ever removed."""
    remote = is_url(prefix)
    try:
        old = (
            parse_json(read_bytes(manifest, limit=1 << 24), manifest)
            if remote
            else read_json(manifest)
        )
        record = load_lists_record(old, manifest)
        paths = [item["path"] for item in record["lists"]]
        if record["skipped_report"]:
            paths.append(record["skipped_report"])
    except (OSError, ValueError, MissingFileError):
        return set()
    split = (lambda p: p.rpartition("/")[::2]) if remote else os.path.split
    folder, stem = split(prefix)

    def ours(p: object) -> bool:
        if not isinstance(p, str) or split(p)[0] != folder:
            return False
        name = split(p)[1]
        rest = name[len(stem) :]
        return name.startswith(stem) and (
            rest == ".skipped.tsv" or (rest.endswith(".lst") and "/" not in rest)
        )

    return {p for p in paths if ours(p)}


def _options_dict(options: ListOptions) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(options).items()}
