"""``rec imagenet``: ILSVRC2012's two tars to GluonCV's layout (spec: imagenet.md).

Everything is checked before anything is created: both tars (and their SHA-1
with ``checksum``), the val map (bundled, ``--val-map``, ``--devkit``, or both
cross-checked), every member name of both tars against the map, and the free
space. Work then goes to ``TARGET.partial``, one step at a time (``train``,
``val``, ``rec``, each built as ``STEP.partial`` and renamed when whole);
only a finished run renames ``TARGET.partial`` to ``TARGET``. ``resume``
continues an interrupted run where it stopped; a finished target is reported
and left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from ..errors import DatasetError, Im2RecError, MissingFileError
from ..executors import LocalExecutor
from ..listing.classmap import class_map_text
from ..listing.lstfile import format_lst_line
from ..packing import PackOptions, pack_list
from ..recordio.manifests import dump, load_pack_manifest
from ..storage.atomic import open_output, own_folder, write_file
from ..storage.files import open_regular, read_json, split_lines
from .tarstream import Member, OddImage, extract_train, extract_val, list_members
from .valmap import ValMap, bundled_val_map, load_devkit, load_val_map

__all__ = [
    "CHECKSUMS",
    "ImagenetInterrupted",
    "ImagenetOptions",
    "ImagenetResult",
    "prepare_imagenet",
]

TRAIN_TAR, VAL_TAR = "ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar"
#: SHA-1 of the official tars, as GluonCV checks them (docs/imagenet.md,
#: "The tars and their checksums").
CHECKSUMS = {
    TRAIN_TAR: "43eda4fe35c1705d6606a6a7a633bc965d194284",
    VAL_TAR: "5f3f73da3395154b60528b2b2a2caf2374f5f178",
}
STATE = ".im2rec-imagenet.json"
#: the layout version of STATE (docs/format.md, "im2rec's own files")
STATE_FORMAT = 1


class DoneState(TypedDict):
    """STATE, written last into a finished target folder."""

    format: int
    complete: bool
    result: dict[str, Any]  # ImagenetResult.to_dict()
    written: str


TRAIN_SHUFFLE_SEED = 0
Progress = Callable[[str, int, int], None]  # (step, bytes or entries done, total)


@dataclass(frozen=True)
class ImagenetOptions:
    download_dir: Path
    target_dir: Path = Path("~/.mxnet/datasets/imagenet")
    checksum: bool = False
    with_rec: bool = False
    num_workers: int = 1
    val_map: Path | None = None
    devkit: Path | None = None
    resume: bool = False
    fix_odd_images: bool = False


@dataclass
class ImagenetResult:
    target: Path
    classes: int = 0
    train_images: int = 0
    val_images: int = 0
    val_map: str = ""
    odd_images: list[OddImage] = field(default_factory=list)
    rec: dict[str, Any] = field(default_factory=dict)
    already_done: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["target"] = str(self.target)
        return d


@dataclass(frozen=True)
class _Plan:
    train_tar: Path
    val_tar: Path
    train_members: list[Member]  # listed (and checked) once, in _validate
    val_members: list[Member]
    val_map: ValMap
    wnids: list[str]
    train_bytes: int
    val_bytes: int


def prepare_imagenet(opts: ImagenetOptions, on_progress: Progress | None = None) -> ImagenetResult:
    """Extract (and with ``with_rec`` pack) ILSVRC2012; see the module doc."""
    t0 = time.perf_counter()
    target = opts.target_dir.expanduser().absolute()
    staging = target.with_name(target.name + ".partial")
    done = _finished(target)
    if done is not None:
        return done
    if target.exists():
        raise DatasetError(
            f"{target} exists and is not a finished `rec imagenet` target; remove it first or "
            "choose another --target-dir"
        )
    if staging.exists() and not opts.resume:
        raise DatasetError(
            f"{staging} holds an interrupted run; continue it with --resume, or delete it"
        )
    progress = on_progress or (lambda _s, _d, _t: None)
    plan = _validate(opts, staging, progress)
    try:
        result = _run_steps(plan, staging, target, opts, progress)
    except KeyboardInterrupt:
        raise ImagenetInterrupted(
            f"interrupted; the work so far is kept in {staging}: run the same command with "
            "--resume to continue"
        ) from None
    except OSError as exc:
        raise Im2RecError(
            f"{exc.filename or staging}: {exc.strerror or exc}; the work so far is kept in "
            f"{staging}: fix this (free space, permissions), then run the same command with "
            "--resume"
        ) from None
    except DatasetError as exc:  # found inside a class tar, which is read only now
        raise DatasetError(
            f"{exc}; the classes extracted so far are kept in {staging}: with a good archive, "
            "run the same command with --resume to continue (or delete it)"
        ) from None
    result.odd_images = _odd_report(staging / "odd_images.partial.tsv", staging / "odd_images.tsv")
    result.seconds = time.perf_counter() - t0
    state: DoneState = {"format": STATE_FORMAT, "complete": True, "result": result.to_dict(),
                        "written": time.strftime("%F %T")}  # fmt: skip
    write_file(staging / STATE, json.dumps(state, indent=1) + "\n")
    os.replace(staging, target)
    return result


class ImagenetInterrupted(Im2RecError):
    """Ctrl-C: the staging folder is kept for ``--resume``."""

    exit_code = 130


def _run_steps(
    plan: _Plan, staging: Path, target: Path, opts: ImagenetOptions, progress: Progress
) -> ImagenetResult:
    own_folder(staging)
    odd_log = staging / "odd_images.partial.tsv"
    with open_output(odd_log, append=True) as log:

        def on_odd(odd: OddImage) -> None:
            log.write(f"{odd.path}\t{odd.kind}\t{odd.action}\n")

        _step(staging, "train", lambda out: _train(plan, out, opts, progress, on_odd))
        _step(staging, "val", lambda out: _val(plan, out, opts, progress, on_odd))
    result = ImagenetResult(target, len(plan.wnids), val_map=plan.val_map.source)
    result.train_images = sum(1 for _ in (staging / "train").glob("*/*"))
    result.val_images = len(plan.val_map.pairs)
    if opts.with_rec:
        _step(staging, "rec", lambda out: _rec(plan, staging, out, target, opts, progress))
        result.rec = _rec_summary(staging / "rec")
    return result


def _finished(target: Path) -> ImagenetResult | None:
    try:
        state = read_json(target / STATE)
    except (OSError, ValueError):
        return None
    # another version's (or a damaged) record: prepare again rather than guess
    if not isinstance(state, dict) or state.get("format", 1) != STATE_FORMAT:
        return None
    if state.get("complete") is not True:
        return None
    try:
        saved = state["result"]
        return ImagenetResult(
            target, saved["classes"], saved["train_images"], saved["val_images"],
            saved["val_map"], [OddImage(**o) for o in saved["odd_images"]], saved["rec"],
            already_done=True,
        )  # fmt: skip
    except (KeyError, TypeError):
        return None


def _validate(opts: ImagenetOptions, staging: Path, progress: Progress) -> _Plan:
    download = opts.download_dir.expanduser()
    tars = [download / TRAIN_TAR, download / VAL_TAR]
    for tar in tars:
        if tar.exists() and not tar.is_file():  # a FIFO or device would be read for ever
            raise DatasetError(f"{tar}: not a regular file; the ImageNet tars must be files")
        if not tar.is_file():
            raise MissingFileError(
                f"{tar}: not found; download it from image-net.org into {download}"
            )
    if opts.checksum:
        # both tars at once: hashlib releases the GIL, so two cores read and hash
        with ThreadPoolExecutor(2) as pool:
            digests = list(pool.map(lambda t: _sha1(t, progress), tars))
        for tar, digest in zip(tars, digests, strict=True):
            if digest != CHECKSUMS[tar.name]:
                raise DatasetError(
                    f"{tar}: SHA-1 {digest} is not the official {CHECKSUMS[tar.name]}; the "
                    "download is damaged or incomplete: download it again"
                )
    val_map = _val_map(opts, download)
    wnids = val_map.wnids
    train = list_members(tars[0])
    for member in train:
        if not member.name.endswith(".tar") or "/" in member.name:
            raise DatasetError(
                f"{tars[0]}: unexpected member {member.name!r} (expected <wnid>.tar)"
            )
    classes = sorted(m.name.removesuffix(".tar") for m in train)
    if classes != wnids:
        extra = sorted(set(classes) - set(wnids))[:3]
        missing = sorted(set(wnids) - set(classes))[:3]
        why = (
            " The bundled map is ILSVRC2012's own (1,000 classes, 50,000 images): a subset or "
            "another dataset needs its own, given with --val-map FILE "
            "(`ILSVRC2012_val_%08d.JPEG wnid` lines, GluonCV's .pklz, valprep.sh, or one "
            "WNID a line) or --devkit."
            if val_map.source == bundled_val_map().source
            else ""
        )
        raise DatasetError(
            f"{tars[0]}: its classes do not match the val map's ({len(classes)} vs {len(wnids)}; "
            f"not in the map: {extra}, missing: {missing}); the labels would disagree.{why}"
        )
    val = list_members(tars[1])
    names = {m.name for m in val}
    expected = set(val_map.as_dict())
    if names != expected:
        missing = sorted(expected - names)[:3]
        extra = sorted(names - expected)[:3]
        raise DatasetError(
            f"{tars[1]} and the val map ({val_map.source}) disagree: missing from the tar "
            f"{missing}, not in the map {extra}"
        )
    plan = _Plan(
        tars[0], tars[1], train, val, val_map, wnids,
        tars[0].stat().st_size, tars[1].stat().st_size,
    )  # fmt: skip
    _check_space(plan, opts, staging)
    return plan


def _val_map(opts: ImagenetOptions, download: Path) -> ValMap:
    maps = []
    if opts.val_map is not None:
        maps.append(load_val_map(opts.val_map.expanduser()))
    if opts.devkit is not None:
        maps.append(load_devkit(opts.devkit.expanduser()))
    if len(maps) == 2:
        differences = maps[0].disagreements(maps[1])
        if differences:
            raise DatasetError(
                f"--val-map and --devkit disagree on {len(differences)} image(s), e.g. "
                + "; ".join(differences[:3])
            )
    if maps:
        return maps[0]
    beside = download / "imagenet_val_maps.pklz"
    return load_val_map(beside) if beside.is_file() else bundled_val_map()


def _check_space(plan: _Plan, opts: ImagenetOptions, staging: Path) -> None:
    need = (plan.train_bytes + plan.val_bytes) * (2 if opts.with_rec else 1)
    if staging.exists():  # resuming: count what is already there as done
        need -= sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())
    existing = next(p for p in [staging, *staging.parents] if p.exists())
    free = shutil.disk_usage(existing).free
    if need > free:
        raise DatasetError(
            f"{existing}: {free / 1e9:,.1f} GB free, about {need / 1e9:,.1f} GB needed (the "
            "images once, and again in the .rec files with --with-rec); free space or choose "
            "another --target-dir"
        )


def _sha1(path: Path, progress: Progress) -> str:
    digest = hashlib.sha1()  # the published checksums are SHA-1
    fd, total = open_regular(path, "is a folder, not an ImageNet tar")
    done = 0
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(4 << 20), b""):
            digest.update(block)
            done += len(block)
            progress(f"checksum {path.name}", done, total)
    return digest.hexdigest()


def _step(staging: Path, name: str, build: Callable[[Path], None]) -> None:
    """Build ``staging/name`` via ``staging/name.partial`` unless it is done."""
    final = staging / name
    if final.is_dir():
        return
    part = staging / f"{name}.partial"
    own_folder(part)
    build(part)
    os.replace(part, final)


def _train(plan: _Plan, out: Path, opts: ImagenetOptions, progress: Progress, on_odd: Any) -> None:
    on_bytes = _counter("train", plan.train_bytes, progress)
    extract_train(
        plan.train_tar, plan.train_members, out, fix_odd=opts.fix_odd_images,
        on_bytes=on_bytes, on_odd=on_odd,
    )  # fmt: skip


def _val(plan: _Plan, out: Path, opts: ImagenetOptions, progress: Progress, on_odd: Any) -> None:
    on_bytes = _counter("val", plan.val_bytes, progress)
    extract_val(
        plan.val_tar, plan.val_members, out, plan.val_map.as_dict(), fix_odd=opts.fix_odd_images,
        on_bytes=on_bytes, on_odd=on_odd,
    )  # fmt: skip


def _counter(step: str, total: int, progress: Progress) -> Callable[[int], None]:
    """A byte counter that worker threads add to."""
    lock, done = threading.Lock(), [0]

    def add(n: int) -> None:
        with lock:
            done[0] += n
            progress(step, done[0], total)

    return add


def _rec(
    plan: _Plan, staging: Path, out: Path, target: Path, opts: ImagenetOptions, progress: Progress
) -> None:
    """train.rec (shuffled: DALI and others shuffle only within a buffer) and
    val.rec (file-name order), labels 0-999 in sorted-WNID order."""
    label = {w: i for i, w in enumerate(plan.wnids)}
    train = [
        (f"{wnid}/{f.name}", label[wnid])
        for wnid in plan.wnids
        for f in sorted((staging / "train" / wnid).iterdir())
    ]
    entries = [(key, lab, path) for key, (path, lab) in enumerate(train)]
    random.Random(TRAIN_SHUFFLE_SEED).shuffle(entries)
    val = [(i, label[w], f"{w}/{f}") for i, (f, w) in enumerate(plan.val_map.pairs)]
    with LocalExecutor(opts.num_workers) as pool:
        for split, items in (("train", entries), ("val", val)):
            lst = out / f"{split}.lst"
            if not lst.exists():
                write_file(lst, "".join(map(format_lst_line, items)))

            def on_entries(done: int, total: int, _bytes: int, name: str = f"{split}.rec") -> None:
                progress(name, done, total)

            packed = pack_list(
                lst, PackOptions(pass_through=True), root=staging / split, executor=pool,
                resume=True, on_progress=on_entries,
            )  # fmt: skip
            if packed.failures:
                raise DatasetError(
                    f"{packed.rec}: {sum(packed.failures.values())} image(s) could not be read "
                    f"(listed in {packed.failure_report}); fix them, then run again with --resume"
                )
            lst.unlink()
            path = out / f"{split}.pack.json"
            manifest = load_pack_manifest(read_json(path), str(path))
            manifest["root"] = str(target / split)  # where the images are once the run is finished
            write_file(path, dump(manifest))
            # the class map beside the .rec, as rec list leaves one: rec info
            # and rec show then name each label's class (its WNID)
            write_file(out / f"{split}.classes.tsv", class_map_text(plan.wnids))


def _rec_summary(rec: Path) -> dict[str, Any]:
    out = {}
    for split in ("train", "val"):
        path = rec / f"{split}.pack.json"
        manifest = load_pack_manifest(read_json(path), str(path))
        out[split] = {"records": manifest["records"], "bytes": manifest["rec"]["bytes"]}
    return out


def _odd_report(log: Path, report: Path) -> list[OddImage]:
    seen: dict[str, OddImage] = {}
    for line in split_lines(log.read_text(encoding="utf-8")):
        path, kind, action = line.split("\t")
        seen[path] = OddImage(path, kind, action)
    odd = sorted(seen.values(), key=lambda o: o.path)
    log.unlink()
    if odd:
        write_file(
            report,
            "path\tkind\taction\n" + "".join(f"{o.path}\t{o.kind}\t{o.action}\n" for o in odd),
        )
    return odd
