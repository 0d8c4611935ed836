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
import json
import os
import random
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .atomic import AtomicGroup
from .entries import Entries, Entry, EntryView, labels_of, shuffle_positions
from .errors import ConfigError, DatasetError, MissingFileError
from .lstfile import bad_chars, cannot_carry, class_map_text, lst_pieces, printable
from .recordio.files import parse_json, read_json
from .storage import is_url, read_bytes, write_bytes
from .storage.walking import walk_prefix

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

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")
IM2REC_SEED = 100  # im2rec.py: random.seed(100)

#: Skip reasons, as they appear in reports and in ``--json``.
UNSAFE_NAME = "name cannot be stored in a .lst line"
SMALL_CLASS = "class below --min-per-class"
ESCAPING_KEY = "key with an empty, '.' or '..' part"

Progress = Callable[[int, int], None]  # (folders scanned, images found)


@dataclass(frozen=True)
class ListOptions:
    """What ``rec list`` does; defaults reproduce ``im2rec.py --list``."""

    recursive: bool = False
    exts: tuple[str, ...] = DEFAULT_EXTS
    chunks: int = 1
    train_ratio: float = 1.0
    test_ratio: float = 0.0
    shuffle: bool = True
    seed: int = IM2REC_SEED
    follow_links: bool = True
    stratify: bool = False
    min_per_class: int = 0

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise ConfigError(f"--chunks must be at least 1, got {self.chunks}")
        for name, ratio in (("--train-ratio", self.train_ratio), ("--test-ratio", self.test_ratio)):
            if not 0.0 <= ratio <= 1.0:
                raise ConfigError(f"{name} must be between 0 and 1, got {ratio:g}")
        if self.train_ratio + self.test_ratio > 1.0 + 1e-9:
            raise ConfigError(
                f"--train-ratio {self.train_ratio:g} plus --test-ratio {self.test_ratio:g} "
                "is more than 1; the rest (if any) becomes the val list"
            )
        if self.min_per_class < 0:
            raise ConfigError(f"--min-per-class must be 0 or more, got {self.min_per_class}")
        exts = tuple(dict.fromkeys(_normalise_ext(e) for e in self.exts))
        if not exts:
            raise ConfigError("--exts needs at least one extension, e.g. --exts .jpg")
        object.__setattr__(self, "exts", exts)


def _normalise_ext(ext: str) -> str:
    ext = ext.strip().lower()
    return ext if ext.startswith(".") else f".{ext}"


@dataclass
class Scan:
    """What a folder walk found."""

    root: str
    entries: Sequence[Entry]  # (an Entries: compact, see im2rec.entries)
    #: label -> folder relative to the root ("." for the root itself)
    classes: list[str]
    #: reason -> paths (relative to the root) that were not listed
    skipped: dict[str, list[str]] = field(default_factory=dict)


def scan_folder(
    root: str | os.PathLike[str], options: ListOptions, on_progress: Progress | None = None
) -> Scan:
    """Walk ``root`` and return its images as im2rec.py would list them."""
    root_s = os.fspath(root)
    remote = is_url(root_s)
    if remote:
        root_s = root_s.rstrip("/")
    elif not os.path.exists(root_s):
        raise MissingFileError(f"{root_s}: no such folder")
    elif not os.path.isdir(root_s):
        raise DatasetError(f"{root_s}: is a file, not a folder of images")
    entries = Entries()
    labels: dict[str, int] = {}
    unsafe: list[str] = []
    escaping: list[str] = []  # bucket keys that are no plain paths
    folders = 0
    add = entries.add  # per-image hot loop
    walk = (
        walk_prefix(root_s, options.exts, options.recursive, refused=escaping)
        if remote
        else _walk(root_s, options)
    )
    for rel_dir, names in walk:
        folders += 1
        prefix = "" if rel_dir == "." else f"{rel_dir}{os.sep}"
        bad_dir = bool(prefix) and (bad_chars(rel_dir) or rel_dir[0].isspace())
        label = -1
        for name in names:
            path = prefix + name
            # Fast path: printable names without edge whitespace are safe.
            plain = name.isprintable() and not name[-1].isspace() and (prefix or name[0] != " ")
            if bad_dir or (not plain and cannot_carry(path)):
                unsafe.append(path)
                continue
            if label < 0:
                label = labels.setdefault(rel_dir, len(labels))
            add(label, path)
        if on_progress is not None:
            on_progress(folders, len(entries))
    skipped = {UNSAFE_NAME: unsafe, ESCAPING_KEY: escaping}
    scan = Scan(root_s, entries, list(labels), {k: v for k, v in skipped.items() if v})
    if options.min_per_class:
        scan = _drop_small_classes(scan, options.min_per_class)
    if not scan.entries:
        if remote:
            raise DatasetError(
                f"{root_s}: no images under this prefix (extensions {', '.join(options.exts)})"
            )
        raise DatasetError(_nothing_found(root_s, options, scan))
    return scan


def _walk(root: str, options: ListOptions) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(folder relative to root, sorted image file names)`` in
    ``os.walk`` top-down order with sorted folders (what im2rec.py does)."""
    exts = frozenset(options.exts)
    # Each stack item: (absolute path, relative path, real paths of the
    # folders above it on this walk), so a link back to any of them is a loop.
    stack: list[tuple[str, str, tuple[str, ...]]] = [(root, ".", (os.path.realpath(root),))]
    while stack:
        path, rel, chain = stack.pop()
        files, dirs = _list_folder(path, exts)
        yield rel, files
        if not options.recursive:
            return
        for entry in reversed(dirs):
            child_rel = entry.name if rel == "." else f"{rel}{os.sep}{entry.name}"
            if entry.is_symlink():
                if not options.follow_links:
                    continue
                real = os.path.realpath(entry.path)
                if real in chain:
                    raise DatasetError(
                        f"{entry.path}: symlink loop: it leads back to {real}, which "
                        "contains it; remove the link, or pass --no-follow-links"
                    )
            else:
                real = f"{chain[-1]}{os.sep}{entry.name}"
            stack.append((entry.path, child_rel, (*chain, real)))


def _list_folder(path: str, exts: frozenset[str]) -> tuple[list[str], list[os.DirEntry[str]]]:
    try:
        with os.scandir(path) as it:
            found = list(it)
    except OSError as exc:
        raise DatasetError(
            f"{path}: cannot read this folder ({exc.strerror or exc}); fix its "
            "permissions or move it out of the tree, then run again"
        ) from exc
    files: list[str] = []
    dirs: list[os.DirEntry[str]] = []
    for entry in found:  # inlined checks: this loop runs once per file in the tree
        try:
            is_dir = entry.is_dir()  # follows links, as os.walk does
        except OSError:
            is_dir = False
        if is_dir:
            dirs.append(entry)
            continue
        # os.path.splitext(name)[1].lower() in exts, without its overhead: the
        # suffix starts at the last dot, unless only dots come before it.
        name = entry.name
        dot = name.rfind(".")
        if dot > 0 and name[dot:].lower() in exts and name[:dot].strip("."):
            try:
                is_file = entry.is_file()  # os.path.isfile in im2rec.py: links followed
            except OSError:
                is_file = False
            if is_file:
                files.append(name)
    files.sort()
    dirs.sort(key=lambda e: e.name)
    return files, dirs


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _drop_small_classes(scan: Scan, minimum: int) -> Scan:
    counts = _label_counts(scan.entries)
    keep = [label for label in range(len(scan.classes)) if counts[label] >= minimum]
    if len(keep) == len(scan.classes):
        return scan
    relabel = {old: new for new, old in enumerate(keep)}
    entries = Entries()
    dropped: list[str] = []
    for e in scan.entries:
        if e.label in relabel:
            entries.add(relabel[e.label], e.path)
        else:
            dropped.append(e.path)
    skipped = {**scan.skipped, SMALL_CLASS: dropped}
    return Scan(scan.root, entries, [scan.classes[old] for old in keep], skipped)


def _nothing_found(root: str, options: ListOptions, scan: Scan) -> str:
    exts = " ".join(options.exts)
    if scan.skipped:
        counts = ", ".join(f"{len(v)} {k}" for k, v in scan.skipped.items())
        return f"{root}: no images left to list ({counts})"
    hint = ""
    if not options.recursive:
        with os.scandir(root) as it:
            if any(_is_dir(e) for e in it):
                hint = "; images in subfolders are listed only with --recursive"
    return f"{root}: no images found (extensions {exts}){hint}"


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


def _label_counts(entries: Sequence[Entry]) -> Counter[int]:
    if isinstance(entries, Entries):
        return Counter(entries.labels)
    return Counter(e.label for e in entries)


def summary(scan: Scan, lists: list[tuple[str, int]]) -> dict[str, Any]:
    counts = _label_counts(scan.entries)
    return {
        "root": scan.root if is_url(scan.root) else os.path.abspath(scan.root),
        "images": len(scan.entries),
        "classes": [
            {"label": label, "folder": folder, "images": counts[label]}
            for label, folder in enumerate(scan.classes)
        ],
        "lists": [{"path": path, "images": n} for path, n in lists],
        "skipped": {reason: len(paths) for reason, paths in scan.skipped.items()},
    }


@dataclass(frozen=True)
class ListResult:
    """What :func:`make_lists` wrote."""

    scan: Scan
    lists: list[tuple[str, int]]  # (path, images)
    class_map: str
    manifest: str
    skipped_report: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            **summary(self.scan, self.lists),
            "class_map": self.class_map,
            "manifest": self.manifest,
            "skipped_report": self.skipped_report,
        }


def make_lists(
    root: str | os.PathLike[str],
    prefix: str | os.PathLike[str],
    options: ListOptions,
    *,
    strict: bool = False,
    on_progress: Progress | None = None,
) -> ListResult:
    """Scan ``root`` and write ``PREFIX*.lst``, ``PREFIX.classes.tsv``,
    ``PREFIX.lists.json`` (and ``PREFIX.skipped.tsv`` when files were
    skipped), all or nothing. Lists a previous run recorded in
    ``PREFIX.lists.json`` that this run does not write are removed, so a
    later ``rec pack PREFIX`` cannot pick up stale ones."""
    scan = scan_folder(root, options, on_progress)
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
    planned = plan_lists(scan.entries, options)
    for suffix, entries in planned:
        lists.append((f"{prefix_s}{suffix}.lst", len(entries)))
    texts.append((names["classes.tsv"], class_map_text(scan.classes)))
    report = names["skipped.tsv"] if scan.skipped else None
    if report:
        rows = (f"{r}\t{printable(p)}\n" for r, paths in scan.skipped.items() for p in paths)
        texts.append((report, "".join(rows)))
    result = ListResult(scan, lists, names["classes.tsv"], names["lists.json"], report)
    manifest = {**result.to_dict(), "options": _options_dict(options)}
    texts.append((names["lists.json"], json.dumps(manifest, indent=1) + "\n"))
    if remote:  # each object appears whole; the run record last
        for (path, _), (_, entries) in zip(lists, planned, strict=True):
            write_bytes(path, "".join(lst_pieces(entries, label_texts)).encode("utf-8"))
        for path, text in texts:
            write_bytes(path, text.encode("utf-8"))
    else:
        with AtomicGroup() as group:
            for (path, _), (_, entries) in zip(lists, planned, strict=True):
                with group.open(path) as f:  # a piece at a time: the text is never whole
                    for piece in lst_pieces(entries, label_texts):
                        f.write(piece.encode("utf-8"))
            for path, text in texts:
                group.write_text(path, text)
    for path in stale - {p for p, _ in lists} - ({report} if report else set()):
        if remote:
            from .storage.objects import remove

            remove(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return result


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
        paths = [item["path"] for item in old.get("lists", [])]
        if old.get("skipped_report"):
            paths.append(old["skipped_report"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, MissingFileError):
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
