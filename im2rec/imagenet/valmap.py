"""Which class each ILSVRC2012 validation image belongs to (spec: imagenet.md §3.3, §7).

The relation is 50,000 ``(ILSVRC2012_val_%08d.JPEG, wnid)`` pairs. It ships
inside the package (``val_map.bin``, derived from GluonCV's
``imagenet_val_maps.pklz`` by ``scripts/make_val_map.py``), so nothing needs
the network. ``--val-map`` reads any of the formats people have:

* GluonCV's ``imagenet_val_maps.pklz`` (gzip) or ``.pkl``: ``[wnids, [(fname,
  wnid), ...]]``, loaded by an unpickler that refuses every global, so a
  hostile pickle is an error and nothing in it runs;
* a ``fname wnid`` list (TAB or spaces; the CNTK ``val.zip@/`` prefix is
  dropped);
* soumith's ``valprep.sh`` (``mkdir -p wnid`` and ``mv fname wnid/`` lines);
* TensorFlow's synset labels: one WNID per line, line i for val image i.

``--devkit`` reads ``ILSVRC2012_devkit_t12.tar.gz`` (meta.mat + the ground
truth, whose IDs are 1-based devkit IDs, not sorted-WNID order).
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
import re
import tarfile
import zlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DatasetError, Im2RecError
from ..formats.tars import BoundedTarInfo
from ..storage.files import open_regular, split_lines
from .matfile import MAX_INFLATED, read_mat

__all__ = ["BUNDLED", "ValMap", "bundled_val_map", "load_devkit", "load_val_map"]

MAGIC = b"im2rec-val-map 1\n"
BUNDLED = "val_map.bin"
NAME = re.compile(r"ILSVRC2012_val_(\d{8})\.JPEG\Z")
WNID = re.compile(r"n\d{8}\Z")
DEVKIT_META = "ILSVRC2012_devkit_t12/data/meta.mat"
DEVKIT_TRUTH = "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt"
#: Bounds for files made by others, checked before anything grows past them:
#: GluonCV's map is 0.7 MB gzipped, 3.5 MB and 403,012 pickle opcodes inside.
MAX_VAL_MAP = 16 << 20  # bytes, on disk and once inflated
MAX_PICKLE_OPS = 1_000_000  # each can make one object: this bounds the memory a pickle takes
VAL_IMAGES = 50_000
MAX_TEXT_LINES = 4 * VAL_IMAGES  # valprep.sh: a mkdir and a mv line per image, and some slack
#: The devkit holds about a dozen files; a member this large, or this many, is not it.
MAX_DEVKIT_MEMBERS = 10_000


@dataclass(frozen=True)
class ValMap:
    """``pairs[i]`` is ``(ILSVRC2012_val_{i+1:08d}.JPEG, wnid)``; ``wnids``
    are the classes, sorted (their positions are the 0-based labels)."""

    pairs: tuple[tuple[str, str], ...]
    source: str

    @property
    def wnids(self) -> list[str]:
        return sorted({w for _, w in self.pairs})

    def as_dict(self) -> dict[str, str]:
        return dict(self.pairs)

    def tsv(self) -> str:
        """The canonical export: ``fname<TAB>wnid`` lines in file-name order."""
        return "".join(f"{f}\t{w}\n" for f, w in self.pairs)

    def disagreements(self, other: ValMap) -> list[str]:
        mine, theirs = self.as_dict(), other.as_dict()
        out = [
            f"{name}: {mine.get(name, 'missing')} in {self.source}, "
            f"{theirs.get(name, 'missing')} in {other.source}"
            for name in sorted(mine.keys() | theirs.keys())
            if mine.get(name) != theirs.get(name)
        ]
        return out


def _checked(pairs: list[tuple[str, str]], source: str) -> ValMap:
    """Names ILSVRC2012_val_00000001.. in order without gaps, WNIDs well
    formed; the full set is 1,000 classes of 50."""
    if not pairs:
        raise DatasetError(f"{source}: the val map is empty")
    if len(pairs) > VAL_IMAGES:
        raise DatasetError(
            f"{source}: {len(pairs):,} entries; the ILSVRC2012 val set has {VAL_IMAGES:,} images"
        )
    pairs = sorted(pairs)
    for i, (name, wnid) in enumerate(pairs, 1):
        m = NAME.match(name)
        if m is None or int(m.group(1)) != i:
            raise DatasetError(
                f"{source}: expected ILSVRC2012_val_{i:08d}.JPEG as entry {i}, found {name!r} "
                "(names must be ILSVRC2012_val_%08d.JPEG, numbered from 1 without gaps or "
                "repeats)"
            )
        if not WNID.match(wnid):
            raise DatasetError(f"{source}: {name} has class {wnid!r}, not a WNID like n01440764")
    vm = ValMap(tuple(pairs), source)
    if len(pairs) == 50_000:
        counts = np.unique([w for _, w in pairs], return_counts=True)[1]
        if len(counts) != 1000 or set(counts.tolist()) != {50}:
            raise DatasetError(
                f"{source}: the ILSVRC2012 val set has 1,000 classes of 50 images; this map has "
                f"{len(counts)} classes of {counts.min()}-{counts.max()}"
            )
    return vm


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise DatasetError(
            f"the val map pickle refers to {module}.{name}; a val map holds only lists and "
            "strings, so it was not loaded (nothing in it was run)"
        )


def _count_ops(data: bytes, source: str) -> None:
    """Walk the pickle's opcodes without running them: more than
    MAX_PICKLE_OPS (or a malformed stream) is refused before any object is
    made, so a small pickle cannot build gigabytes of lists."""
    try:
        for n, _ in enumerate(pickletools.genops(data)):
            if n >= MAX_PICKLE_OPS:
                raise DatasetError(
                    f"{source}: the pickle holds more than {MAX_PICKLE_OPS:,} operations; "
                    "a val map needs about 400,000: not loaded"
                )
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - genops raises several kinds on bad data
        raise DatasetError(f"{source}: not a readable val map pickle ({exc})") from None


def _from_pickle(data: bytes, source: str) -> ValMap:
    _count_ops(data, source)
    try:
        obj = _NoGlobals(io.BytesIO(data)).load()
    except DatasetError as exc:
        raise DatasetError(f"{source}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any malformed pickle
        raise DatasetError(f"{source}: not a readable val map pickle ({exc})") from None
    try:
        _dirs, mappings = obj
        if len(mappings) > VAL_IMAGES:
            return _checked(list(mappings), source)  # the count check says what is wrong
        pairs = [(str(f), str(w)) for f, w in mappings]
    except (TypeError, ValueError):
        raise DatasetError(
            f"{source}: expected GluonCV's structure [wnids, [(fname, wnid), ...]]"
        ) from None
    return _checked(pairs, source)


def _from_text(text: str, source: str) -> ValMap:
    if text.count("\n") > MAX_TEXT_LINES:  # counted before any line becomes a list
        raise DatasetError(
            f"{source}: more than {MAX_TEXT_LINES:,} lines; a val map has one or two per image "
            f"({VAL_IMAGES:,} images): not loaded"
        )
    lines = [line.split() for line in split_lines(text) if line.strip()]
    if any(line[0] == "mv" for line in lines):  # valprep.sh
        pairs = [(ln[1], ln[2].rstrip("/")) for ln in lines if ln[0] == "mv" and len(ln) >= 3]
    elif all(len(line) == 1 for line in lines):  # TensorFlow: a WNID per line
        pairs = [(f"ILSVRC2012_val_{i:08d}.JPEG", ln[0]) for i, ln in enumerate(lines, 1)]
    elif all(len(line) == 2 for line in lines):
        pairs = [(Path(f.split("@/")[-1]).name, w) for f, w in lines]
    else:
        raise DatasetError(
            f"{source}: not a val map format im2rec knows (GluonCV pklz/pkl, `fname wnid` "
            "lines, valprep.sh, or one WNID per line)"
        )
    return _checked(pairs, source)


def load_val_map(path: Path) -> ValMap:
    """A val map from any supported file (see the module doc)."""
    try:
        fd, size = open_regular(path, "is a folder, not a val map")  # (a FIFO would never end)
    except FileNotFoundError:
        raise DatasetError(f"{path}: val map not found") from None
    except Im2RecError as exc:
        raise DatasetError(str(exc)) from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(min(size, MAX_VAL_MAP) + 1)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, path)
    if len(data) > MAX_VAL_MAP:
        raise DatasetError(
            f"{path}: more than {MAX_VAL_MAP >> 20} MiB; a val map is about 3.5 MB: not loaded"
        )
    if data[:1] in (b"(", b"\x80", b"]"):
        return _from_pickle(data, str(path))
    try:
        return _from_text(data.decode("ascii"), str(path))
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: neither a pickle nor a text val map") from None


def _gunzip(data: bytes, path: Path) -> bytes:
    """Inflate gzip ``data`` (all its members), refusing more than
    MAX_VAL_MAP bytes before they are made: a small file can inflate to
    gigabytes."""
    out: list[bytes] = []
    size = 0
    while data:
        inflate = zlib.decompressobj(wbits=31)
        try:
            chunk = inflate.decompress(data, MAX_VAL_MAP + 1 - size)
        except zlib.error as exc:
            raise DatasetError(f"{path}: a damaged gzip file ({exc})") from None
        size += len(chunk)
        out.append(chunk)
        if size > MAX_VAL_MAP:
            raise DatasetError(
                f"{path}: inflates to more than {MAX_VAL_MAP >> 20} MiB; a val map is about "
                "3.5 MB: not loaded (a damaged file, or a decompression bomb)"
            )
        if not inflate.eof:
            raise DatasetError(f"{path}: a damaged gzip file (it ends early)")
        data = inflate.unused_data.lstrip(b"\0")  # the next member, after any padding
    return b"".join(out)


def bundled_val_map() -> ValMap:
    """The 50,000-image relation that ships with im2rec."""
    blob = zlib.decompress(resources.files(__package__).joinpath(BUNDLED).read_bytes())
    head, labels = blob[len(MAGIC) :].split(b"\n\n", 1)
    wnids = head.decode("ascii").split("\n")
    index = np.frombuffer(labels, "<u2")
    pairs = [(f"ILSVRC2012_val_{i:08d}.JPEG", wnids[k]) for i, k in enumerate(index.tolist(), 1)]
    return ValMap(tuple(pairs), "the val map bundled with im2rec")


def load_devkit(path: Path) -> ValMap:
    """The val relation from the devkit's meta.mat and ground truth, read
    straight from the ``.tar.gz``."""
    try:
        fd, _ = open_regular(path, "is a folder, not the devkit")
    except FileNotFoundError:
        raise DatasetError(f"{path}: devkit not found") from None
    except Im2RecError as exc:
        raise DatasetError(str(exc)) from None
    try:
        with (
            os.fdopen(fd, "rb") as f,
            tarfile.open(fileobj=f, mode="r:*", tarinfo=BoundedTarInfo) as tar,
        ):
            meta, truth = _members(tar, path)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:  # tar or gzip damage
        raise DatasetError(f"{path}: not a readable devkit archive ({exc})") from None
    synsets = read_mat(meta, f"{path}:{DEVKIT_META}").get("synsets")
    if not isinstance(synsets, list):
        raise DatasetError(f"{path}: meta.mat has no `synsets` struct array")
    try:
        leaves = {
            int(s["ILSVRC2012_ID"]): str(s["WNID"]) for s in synsets if int(s["num_children"]) == 0
        }
        ids = [int(v) for v in truth.decode("ascii").split()]
    except (KeyError, TypeError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise DatasetError(
            f"{path}: meta.mat's synsets or the ground truth are not the devkit's ({exc})"
        ) from None
    if len(set(leaves.values())) != len(leaves):
        raise DatasetError(f"{path}: meta.mat names a WNID twice among its leaf synsets")
    unknown = sorted(set(ids) - leaves.keys())
    if unknown:
        raise DatasetError(
            f"{path}: the ground truth uses IDs meta.mat does not define: {unknown[:5]}"
        )
    pairs = [(f"ILSVRC2012_val_{i:08d}.JPEG", leaves[k]) for i, k in enumerate(ids, 1)]
    return _checked(pairs, str(path))


def _members(tar: tarfile.TarFile, path: Path) -> tuple[bytes, bytes]:
    """meta.mat and the ground truth, read as the archive is walked: at most
    MAX_DEVKIT_MEMBERS headers, none of a member larger than MAX_INFLATED
    (skipping one means inflating it), each header dropped once read."""
    found: dict[str, bytes] = {}
    for n, info in enumerate(tar):
        tar.members.clear()  # type: ignore[attr-defined]  # a list, left out of typeshed
        if n >= MAX_DEVKIT_MEMBERS:
            raise DatasetError(f"{path}: more than {MAX_DEVKIT_MEMBERS:,} files; not the devkit")
        if info.size > MAX_INFLATED:  # the real members are 2 MB and 300 KB
            raise DatasetError(
                f"{path}: {info.name} is {info.size:,} bytes; this is not the devkit"
            )
        if info.name in (DEVKIT_META, DEVKIT_TRUTH) and info.isfile():
            f = tar.extractfile(info)
            assert f is not None  # a regular file
            found[info.name] = f.read()
            if len(found) == 2:
                return found[DEVKIT_META], found[DEVKIT_TRUTH]
    missing = DEVKIT_META if DEVKIT_META not in found else DEVKIT_TRUTH
    raise DatasetError(f"{path}: {missing} is missing; is this ILSVRC2012_devkit_t12.tar.gz?")
