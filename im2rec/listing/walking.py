"""``rec list``'s walk: a folder (or a bucket prefix) into entries, in
im2rec.py's order (docs/format.md, "im2rec.py, Listing"; :mod:`.making`
says the rules), with names a ``.lst`` line cannot carry skipped."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ..errors import ConfigError, DatasetError, MissingFileError
from ..storage import is_url
from .buckets import walk_prefix
from .classmap import carried
from .entries import Entries, Entry
from .lstfile import bad_chars, cannot_carry

__all__ = ["DEFAULT_EXTS", "IM2REC_SEED", "ListOptions", "Scan", "scan_folder"]

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")


IM2REC_SEED = 100  # im2rec.py: random.seed(100)


#: Skip reasons, as they appear in reports and in ``--json``.
UNSAFE_NAME = "name cannot be stored in a .lst line"
#: what image files of another extension are counted as (``Scan.passed``)
OTHER_EXTENSION = "image files not in --exts:"
#: image extensions a listing counts when ``--exts`` leaves them out
OTHER_IMAGES = frozenset(
    ".bmp .dib .gif .webp .tif .tiff .ppm .pgm .pbm .pnm .jp2 .j2k .jpx .avif .heic .heif "
    ".jxl .ico .tga .jfif .jpe .jpeg .jpg .png .qoi".split()
)
#: the skip reason of the images of a class folder whose name a class map
#: cannot carry as that same name (a backslash, which readers take for a
#: separator: ``a\b`` reads back as ``a/b``)
UNCARRIED_CLASS = "folder name a class map cannot carry"


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
    #: list a root whose folders are splits (train/, val/, test/) split by split
    #: with one class map (``im2rec.listing.splits``); False: as one tree
    splits: bool = True
    #: the class order (a --classes file), instead of the walk's
    classes: tuple[str, ...] | None = None

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
    entries: Sequence[Entry]  # (an Entries: compact, see im2rec.listing.entries)
    #: label -> folder relative to the root ("." for the root itself)
    classes: list[str]
    #: reason -> paths (relative to the root) that were not listed
    skipped: dict[str, list[str]] = field(default_factory=dict)
    #: what was passed over on purpose, counted (not a problem: ``--strict``
    #: ignores it): image files of other extensions by extension, images
    #: with no object (``--keep-empty`` lists them)
    passed: dict[str, int] = field(default_factory=dict)


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
    uncarried: list[str] = []
    escaping: list[str] = []  # bucket keys that are no plain paths
    folders = 0
    add = entries.add  # per-image hot loop
    other_exts: Counter[str] = Counter()
    walk = (
        walk_prefix(root_s, options.exts, options.recursive, refused=escaping)
        if remote
        else _walk(root_s, options, other_exts)
    )
    for rel_dir, names in walk:
        folders += 1
        prefix = "" if rel_dir == "." else f"{rel_dir}{os.sep}"
        bad_dir = bool(prefix) and (bad_chars(rel_dir) or rel_dir[0].isspace())
        if prefix and not bad_dir and not carried(rel_dir.replace(os.sep, "/")):
            uncarried += [prefix + name for name in names]
            continue
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
    skipped = {UNSAFE_NAME: unsafe, UNCARRIED_CLASS: uncarried, ESCAPING_KEY: escaping}
    passed = {f"{OTHER_EXTENSION} {ext}": n for ext, n in sorted(other_exts.items())}
    scan = Scan(root_s, entries, list(labels), {k: v for k, v in skipped.items() if v}, passed)
    if options.min_per_class:
        scan = drop_small_classes(scan, options.min_per_class)
    if not scan.entries:
        if remote:
            raise DatasetError(
                f"{root_s}: no images under this prefix (extensions {', '.join(options.exts)})"
            )
        raise DatasetError(nothing_found(root_s, options, scan))
    return scan


def _walk(
    root: str, options: ListOptions, passed: Counter[str] | None = None
) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(folder relative to root, sorted image file names)`` in
    ``os.walk`` top-down order with sorted folders (what im2rec.py does);
    ``passed`` counts the image files of other extensions, by extension."""
    exts = frozenset(options.exts)
    # Each stack item: (absolute path, relative path, real paths of the
    # folders above it on this walk), so a link back to any of them is a loop.
    stack: list[tuple[str, str, tuple[str, ...]]] = [(root, ".", (os.path.realpath(root),))]
    while stack:
        path, rel, chain = stack.pop()
        files, dirs = _list_folder(path, exts, passed)
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


def _list_folder(
    path: str, exts: frozenset[str], passed: Counter[str] | None = None
) -> tuple[list[str], list[os.DirEntry[str]]]:
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
        elif passed is not None and dot > 0 and name[dot:].lower() in OTHER_IMAGES:
            passed[name[dot:].lower()] += 1
    files.sort()
    dirs.sort(key=lambda e: e.name)
    return files, dirs


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def drop_small_classes(scan: Scan, minimum: int) -> Scan:
    counts = label_counts(scan.entries)
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
    return Scan(scan.root, entries, [scan.classes[old] for old in keep], skipped, scan.passed)


def nothing_found(root: str, options: ListOptions, scan: Scan) -> str:
    exts = " ".join(options.exts)
    if scan.skipped:
        counts = ", ".join(f"{len(v)} {k}" for k, v in scan.skipped.items())
        return f"{root}: no images left to list ({counts})"
    hint = ""
    if not options.recursive:
        with os.scandir(root) as it:
            if any(_is_dir(e) for e in it):
                hint = "; images in subfolders are listed only with --recursive"
    others = {what.split()[-1]: n for what, n in scan.passed.items()}
    if others:
        counted = ", ".join(f"{n:,} {ext}" for ext, n in others.items())
        hint += f"; it holds image files of other extensions ({counted}): --exts " + ",".join(
            [*options.exts, *others]
        )
    return f"{root}: no images found (extensions {exts}){hint}"


def label_counts(entries: Sequence[Entry]) -> Counter[int]:
    if isinstance(entries, Entries):
        return Counter(entries.labels)
    return Counter(e.label for e in entries)
