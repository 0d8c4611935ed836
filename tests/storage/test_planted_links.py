"""Outputs are never written through a planted link (docs/security.md,
"Outputs"), found systematically rather than name by name.

Each command runs twice, in process (so the temporary names, which hold the
process id, are the same both times). The first run records every file it
opens for writing and every folder it makes, and checks that each file was
created the one safe way (``O_EXCL | O_NOFOLLOW``, or continued with
``O_NOFOLLOW``) and none through Python's ``open``. The second run starts
from the same inputs with a symlink (then a hard link) to a victim planted
at every one of those names, temporary ones included: the victim must be
untouched, and the command must finish or stop with one ``Error:`` line.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image

from im2rec.cli import main
from im2rec.recordio import IndexedRecordWriter, pack

from ..imagenet_fixture import make_fake_imagenet


@dataclass
class Writes:
    files: list[Path] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)


@contextmanager
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Writes]:
    """Every file opened for writing and every folder made in the block."""
    writes = Writes()
    real_os_open, real_open, real_mkdir = os.open, builtins.open, os.mkdir

    def os_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR):
            # (relative to a folder descriptor: rec unpack's images; the
            # name alone is recorded, the flags are checked all the same)
            full = Path(os.fsdecode(path)).absolute()
            created = bool(flags & os.O_CREAT)
            if not flags & os.O_NOFOLLOW or (created and not flags & os.O_EXCL):
                writes.unsafe.append(f"os.open({full}, {flags:#o})")
            writes.files.append(full)
        return real_os_open(path, flags, mode, dir_fd=dir_fd)

    def py_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | bytes | os.PathLike) and set(mode) & set("wax+"):
            writes.unsafe.append(f"open({os.fsdecode(file)}, {mode!r})")
        return real_open(file, mode, *args, **kwargs)

    def mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(path, mode, dir_fd=dir_fd)
        if dir_fd is None:
            writes.folders.append(Path(os.fsdecode(path)).absolute())

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", py_open)
    monkeypatch.setattr(io, "open", py_open)
    monkeypatch.setattr(os, "mkdir", mkdir)
    try:
        yield writes
    finally:
        monkeypatch.undo()


def jpeg(seed: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (12 + seed, 10), (seed * 30 % 256, 60, 90)).save(out, "JPEG")
    return out.getvalue()


def small_rec(path: Path, n: int = 6, labels: Callable[[int], float] = float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with IndexedRecordWriter(path) as w:
        for key in range(n):
            w.write_key(key, pack((0, labels(key % 3), key, 0), jpeg(key)))
    return path


def images(root: Path) -> None:
    for cls in ("cats", "dogs"):
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i in range(3):
            (root / cls / f"{i}.jpg").write_bytes(jpeg(i))
    (root / "dogs" / "broken.jpg").write_bytes(b"not a jpeg")  # a failure report


def shard(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for key, members in (("a", {"jpg": jpeg(1), "cls": b"1"}), ("b", {"jpg": jpeg(2)})):
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def imagenet(root: Path) -> None:
    download = root / "dl"
    make_fake_imagenet(download).write_pklz(download / "imagenet_val_maps.pklz")


#: (name, set-up of the inputs in a folder, the command's arguments there)
Scenario = tuple[str, Callable[[Path], None], Callable[[Path], list[str]]]
SCENARIOS: list[Scenario] = [
    ("list", lambda d: images(d / "img"), lambda d: ["list", str(d / "img"), "-o", str(d / "out" / "ex"),
                                "--recursive", "--train-ratio", "0.5", "-q"]),
    ("pack", lambda d: (images(d / "img"), _lst(d)),
     lambda d: ["pack", str(d / "ex.lst"), "--root", str(d / "img"), "--pass-through", "-q"]),
    ("pack --resume", lambda d: (images(d / "img"), _lst(d)),
     lambda d: ["pack", str(d / "ex.lst"), "--root", str(d / "img"), "--resume", "-q"]),
    ("pack --shards", lambda d: (images(d / "img"), _lst(d)),
     lambda d: ["pack", str(d / "ex.lst"), "--root", str(d / "img"), "--shards", "2",
                "--pass-through", "-q"]),
    ("pack insightface", lambda d: (images(d / "img"), _lst(d)),
     lambda d: ["pack", str(d / "ex.lst"), "--root", str(d / "img"), "--pass-through",
                "--layout", "insightface", "-q"]),
    ("index", lambda d: small_rec(d / "d.rec").with_suffix(".idx").unlink(),
     lambda d: ["index", str(d / "d.rec")]),
    ("show", lambda d: small_rec(d / "d.rec"), lambda d: ["show", str(d / "d.rec"), "-o",
                                                         str(d / "sheet.png")]),
    ("export", lambda d: small_rec(d / "d.rec"),
     lambda d: ["export", str(d / "d.rec"), "--to", "webdataset", "-o",
                str(d / "shards" / "x-%06d.tar"), "--maxcount", "2", "-q"]),
    ("import", lambda d: shard(d / "s" / "x-000000.tar"),
     lambda d: ["import", "webdataset", str(d / "s" / "x-000000.tar"), "-o", str(d / "back"),
                "--overwrite", "-q"]),
    ("merge", lambda d: (small_rec(d / "a.rec"), small_rec(d / "b.rec")),
     lambda d: ["merge", str(d / "a.rec"), str(d / "b.rec"), "-o", str(d / "m.rec"),
                "--renumber", "--overwrite"]),
    ("unpack", lambda d: small_rec(d / "d.rec"), lambda d: ["unpack", str(d / "d.rec"),
                                                           str(d / "out")]),
    ("convert", lambda d: small_rec(d / "d.rec"),
     lambda d: ["convert", str(d / "d.rec"), "--layout", "insightface", "-o", str(d / "faces"),
                "--overwrite"]),
    ("imagenet", imagenet,
     lambda d: ["imagenet", "--download-dir", str(d / "dl"), "--target-dir", str(d / "t"),
                "--with-rec", "--resume", "-q"]),
]  # fmt: skip


def _lst(d: Path) -> None:
    names = sorted(p.relative_to(d / "img").as_posix() for p in (d / "img").rglob("*.jpg"))
    (d / "ex.lst").write_text(
        "".join(f"{i}\t{i % 2}\t{n}\n" for i, n in enumerate(names)), encoding="utf-8"
    )


def run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def snapshot(victim: Path) -> dict[str, Any]:
    return {
        p.relative_to(victim.parent).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(victim.parent.rglob("*"))
        if p == victim or victim in p.parents
    }


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s[0] for s in SCENARIOS])
@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
@pytest.mark.slow
def test_no_output_is_written_through_a_planted_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: Scenario, kind: str
) -> None:
    name, setup, args_of = scenario
    first = tmp_path / "first" / "run"
    first.mkdir(parents=True)
    setup(first)
    with recorded(monkeypatch) as writes:
        code, output = run(args_of(first))
    assert code == 0, output
    assert writes.unsafe == [], "created without O_EXCL|O_NOFOLLOW: " + "\n".join(writes.unsafe)
    made_files = {p.relative_to(first) for p in writes.files if first in p.parents}
    made_folders = {p.relative_to(first) for p in writes.folders if first in p.parents}
    assert made_files, "the recorder saw no output"

    # the same inputs again, a link at every name the first run wrote
    second = tmp_path / "second" / "run"
    second.mkdir(parents=True)
    setup(second)
    victim_dir = tmp_path / "second" / "victims"
    victim_dir.mkdir()
    victim = victim_dir / "precious.txt"
    victim.write_text("precious\n")
    planted = 0
    for rel in sorted(made_files | made_folders, key=lambda r: len(r.parts)):
        target = second / rel
        if not target.parent.is_dir() or target.parent.is_symlink() or os.path.lexists(target):
            continue  # (made by the run itself, or an input: not plantable beforehand)
        if rel in made_folders:
            if kind == "hardlink":  # (no hard links to folders: made, for files inside)
                target.mkdir()
                continue
            target.symlink_to(victim_dir, target_is_directory=True)
        elif kind == "symlink":
            target.symlink_to(victim)
        else:
            os.link(victim, target)
        planted += 1
    assert planted
    before = snapshot(victim)
    code, output = run(args_of(second))
    assert snapshot(victim) == before, f"{name}: the victim was written through a {kind}"
    assert code in (0, 1), output
    if code == 1:
        assert output.startswith("Error: ") and "Traceback" not in output, output


@pytest.mark.slow
def test_a_resumed_pack_refuses_a_partial_file_that_is_a_link(tmp_path: Path) -> None:
    images(tmp_path / "img")
    _lst(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "ex.rec.partial").symlink_to(victim)
    (tmp_path / "ex.idx.partial").symlink_to(victim)
    state = {"version": 1}
    (tmp_path / "ex.rec.partial.json").write_text(json.dumps(state))
    code, output = run(["pack", str(tmp_path / "ex.lst"), "--root", str(tmp_path / "img"),
                        "--resume", "-q"])  # fmt: skip
    assert victim.read_bytes() == b"precious"
    assert code in (0, 1), output


def test_the_library_writers_replace_a_planted_link(tmp_path: Path) -> None:
    import numpy as np

    from im2rec.recordio import MXIndexedRecordIO, RecordIndex
    from im2rec.training.augment.ndarray_file import save_ndarrays

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    for name in ("d.rec", "d.idx", "mean.bin", "i.idx"):
        (tmp_path / name).symlink_to(victim)
    w = MXIndexedRecordIO(str(tmp_path / "d.idx"), str(tmp_path / "d.rec"), "w")
    w.write_idx(0, pack((0, 1.0, 0, 0), b"x"))
    w.close()
    save_ndarrays(tmp_path / "mean.bin", [("mean_img", np.zeros((3, 2, 2), np.float32))])
    RecordIndex([0], np.zeros(1, np.int64), "i.idx").save(tmp_path / "i.idx")
    assert victim.read_bytes() == b"precious"
    assert not any((tmp_path / n).is_symlink() for n in ("d.rec", "d.idx", "mean.bin", "i.idx"))
