"""Packing: records, geometry, failures as data, determinism, resume."""

from __future__ import annotations

import errno
import io
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from im2rec.errors import ConfigError, DatasetError, MissingFileError
from im2rec.executors import LocalExecutor
from im2rec.imaging.codec import im2rec_geometry
from im2rec.listing.lstfile import read_lst
from im2rec.packing import DiskFullError, PackInterrupted, PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, unpack
from im2rec.storage import copying as copying_module

from ..conftest import make_odd_images, photo, photo_folder, write_lst


@pytest.fixture
def odd(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    cases = make_odd_images(tmp_path / "imgs")
    write_lst(tmp_path / "odd.lst", list(cases))
    return tmp_path / "odd.lst", cases


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    """120 small photos in a folder named like the list."""
    size = lambda i: (40 + i % 50, 30 + i % 40)  # noqa: E731
    names = photo_folder(tmp_path / "ph", 120, size, "p{i:03d}.jpg", quality=85)
    return write_lst(tmp_path / "ph.lst", names, [[float(i % 5), float(i)] for i in range(120)])


def records(rec: Path) -> list[tuple[object, bytes]]:
    reader = IndexedRecordReader(rec)
    return [unpack(reader.read_key(k)) for k in reader.keys]


@pytest.mark.slow
def test_pass_through_stores_the_file_bytes(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    result = pack_list(lst, PackOptions(pass_through=True), root=lst.parent / "imgs")
    ok = [n for n in cases if cases[n] not in ("missing", "unreadable")]
    assert result.records == len(ok)
    for (header, payload), name in zip(records(result.rec), ok, strict=True):
        assert payload == (lst.parent / "imgs" / name).read_bytes()
        index = list(cases).index(name)
        assert (header.flag, header.label, header.id, header.id2) == (0, float(index % 3), index, 0)


def test_every_odd_image_is_packed_or_reported(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    result = pack_list(lst, PackOptions(resize=32), root=lst.parent / "imgs")
    expected_failures = {n: r for n, r in cases.items() if r != "ok"}
    assert result.records == len(cases) - len(expected_failures)
    assert dict(result.failures) == Counter(expected_failures.values())
    assert Counter(expected_failures.values())["undecodable"] >= 2
    assert result.failure_report is not None
    rows = [line.split("\t") for line in result.failure_report.read_text().splitlines()]
    assert rows[0] == ["line", "index", "path", "reason", "detail"]
    assert {r[2]: r[3] for r in rows[1:]} == expected_failures
    for _header, payload in records(result.rec):
        img = Image.open(io.BytesIO(payload))
        assert img.format == "JPEG" and img.mode == "RGB" and min(img.size) == 32


def test_exif_orientation_is_applied_before_resizing(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    result = pack_list(lst, PackOptions(resize=24), root=lst.parent / "imgs")
    index = list(cases).index("rotated.jpg")
    payload = dict((h.id, p) for h, p in records(result.rec))[index]  # type: ignore[attr-defined]
    assert Image.open(io.BytesIO(payload)).size == (24, 32)  # 64x48 shown rotated: 48x64


@pytest.mark.slow
def test_color_modes(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    gray = pack_list(lst, PackOptions(color=0), root=lst.parent / "imgs")
    assert {Image.open(io.BytesIO(p)).mode for _, p in records(gray.rec)} == {"L"}
    keep = pack_list(lst, PackOptions(color=-1, encoding=".png"), root=lst.parent / "imgs")
    payloads = {h.id: p for h, p in records(keep.rec)}  # type: ignore[attr-defined]
    modes = {key: Image.open(io.BytesIO(p)).mode for key, p in payloads.items()}
    assert modes[list(cases).index("alpha.png")] == "RGBA"
    # 16 bits kept: the PNG header says so (Pillow before 10.2 opens it as "I")
    ihdr = payloads[list(cases).index("sixteen.png")][16:26]
    assert (ihdr[8], ihdr[9]) == (16, 0)  # bit depth 16, colour type 0 (gray)
    assert modes[list(cases).index("gray.jpg")] == "L"


@pytest.mark.parametrize(
    ("size", "resize", "crop", "expected"),
    [((40, 60), 16, False, (16, 24)), ((31, 17), 16, False, (29, 16)), ((10, 10), 16, False, (16, 16)),
     ((90, 30), 0, True, (30, 30)), ((30, 90), 20, True, (20, 20)), ((64, 48), 0, False, (64, 48))],
)  # fmt: skip
def test_geometry_matches_im2rec(
    tmp_path: Path, size: tuple[int, int], resize: int, crop: bool, expected: tuple[int, int]
) -> None:
    assert im2rec_geometry(*size, resize, crop)[1] == expected
    photo(*size).save(tmp_path / "x.jpg")
    lst = write_lst(tmp_path / "g.lst", ["x.jpg"])
    result = pack_list(lst, PackOptions(resize=resize, center_crop=crop), root=tmp_path)
    assert Image.open(io.BytesIO(records(result.rec)[0][1])).size == expected


def test_large_shrink_uses_draft_and_keeps_geometry(tmp_path: Path) -> None:
    photo(800, 600).save(tmp_path / "big.jpg", quality=90)
    lst = write_lst(tmp_path / "b.lst", ["big.jpg"])
    result = pack_list(lst, PackOptions(resize=100, center_crop=True), root=tmp_path)
    out = Image.open(io.BytesIO(records(result.rec)[0][1]))
    assert out.size == (100, 100)
    reference = (
        photo(800, 600).crop((100, 0, 700, 600)).resize((100, 100), Image.Resampling.BILINEAR)
    )
    diff = np.abs(np.asarray(out, np.int16) - np.asarray(reference, np.int16))
    assert diff.mean() < 4  # DCT-domain scaling is visually the same


def test_pack_label(photos: Path) -> None:
    kept = pack_list(photos, PackOptions(pass_through=True, pack_label=True))
    header, _ = records(kept.rec)[7]
    assert header.flag == 2 and header.label.tolist() == [2.0, 7.0]  # type: ignore[attr-defined]
    assert kept.dropped_labels == 0
    first = pack_list(photos, PackOptions(pass_through=True))
    header, _ = records(first.rec)[7]
    assert (header.flag, header.label) == (0, 2.0)  # type: ignore[attr-defined]
    assert first.dropped_labels == 120


@pytest.mark.slow
def test_any_worker_count_gives_the_same_bytes(photos: Path, tmp_path: Path) -> None:
    outputs = []
    for workers in (1, 2, 3):
        with LocalExecutor(workers) as executor:
            result = pack_list(photos, PackOptions(resize=24), executor=executor)
        outputs.append((result.rec.read_bytes(), result.idx.read_bytes()))
        with LocalExecutor(workers) as executor:
            result = pack_list(photos, PackOptions(pass_through=True), executor=executor)
        outputs.append((result.rec.read_bytes(), result.idx.read_bytes()))
    assert outputs[0::2] == [outputs[0]] * 3 and outputs[1::2] == [outputs[1]] * 3


@pytest.mark.slow
def test_fifos_and_devices_in_a_list_fail_instead_of_hanging(photos: Path) -> None:
    """A .lst can name anything: a FIFO would block the read forever and
    /dev/zero never end. Each is a failure of its own; the run goes on."""
    import subprocess
    import sys

    root = photos.parent / "ph"
    os.mkfifo(root / "fifo.jpg")
    (root / "zero.jpg").symlink_to("/dev/zero")
    names = ["p000.jpg", "fifo.jpg", "zero.jpg", "p001.jpg"]
    lst = write_lst(photos.parent / "odd.lst", names)
    rec = str(Path(sys.executable).with_name("rec"))
    done = subprocess.run(
        [rec, "pack", str(lst), "--root", str(root), "--pass-through", "--num-workers", "1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = (photos.parent / "odd.failures.tsv").read_text().splitlines()[1:]
    assert [line.split("\t")[2:4] for line in report] == [
        ["fifo.jpg", "unreadable"], ["zero.jpg", "unreadable"]
    ]  # fmt: skip
    assert len(IndexedRecordReader(photos.parent / "odd.rec")) == 2


@pytest.mark.slow
def test_the_lock_is_released_while_forked_workers_live(photos: Path) -> None:
    """Workers forked during a pack share the locked file; the lock must not
    outlive the pack (the same pool packs the list again, and so may others)."""
    import fcntl

    with LocalExecutor(2) as executor:
        pack_list(photos, PackOptions(resize=24), executor=executor)
        pack_list(photos, PackOptions(resize=24), executor=executor, resume=True)
        fd = os.open(photos, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if still held
        finally:
            os.close(fd)


def test_manifest(photos: Path) -> None:
    import hashlib

    result = pack_list(photos, PackOptions(pass_through=True))
    manifest = json.loads(result.manifest.read_text())
    assert manifest["records"] == 120 and manifest["failures"] == {}
    for key, path in (("rec", result.rec), ("idx", result.idx)):
        assert manifest[key]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert manifest[key]["bytes"] == path.stat().st_size
    assert manifest["options"]["pass_through"] is True and manifest["list"]["entries"] == 120
    assert not list(photos.parent.glob("*.partial*"))


def outputs(lst: Path) -> tuple[bytes, bytes]:
    return lst.with_suffix(".rec").read_bytes(), lst.with_suffix(".idx").read_bytes()


def interrupt_after(n: int):  # type: ignore[no-untyped-def]
    def progress(done: int, _total: int, _bytes: int) -> None:
        if done == n:
            raise KeyboardInterrupt

    return progress


def test_interrupt_keeps_partial_and_resume_is_byte_identical(photos: Path) -> None:
    options = PackOptions(resize=24)
    pack_list(photos, options)
    reference = outputs(photos)
    photos.with_suffix(".rec").unlink()
    photos.with_suffix(".idx").unlink()
    with pytest.raises(PackInterrupted, match=r"interrupted after 51 of 120 entries .*--resume"):
        pack_list(photos, options, on_progress=interrupt_after(51))
    assert not photos.with_suffix(".rec").exists()  # nothing that looks complete
    assert photos.with_suffix(".rec.partial").exists()
    result = pack_list(photos, options, resume=True)
    assert result.resumed_from == 51  # what the interruption said
    assert outputs(photos) == reference


def test_resume_continues_after_entries_that_failed_last(photos: Path) -> None:
    """Interrupted right after images that failed: the resume position still
    agrees with the interruption's count, and the failures are not lost."""
    options = PackOptions(pass_through=True)
    items = read_lst(photos)
    for item in items[40:43]:  # entries 41-43 fail; the run stops after the 43rd
        (photos.parent / "ph" / item.path).unlink()
    with pytest.raises(PackInterrupted, match=r"interrupted after 43 of 120 entries"):
        pack_list(photos, options, on_progress=interrupt_after(43))
    result = pack_list(photos, options, resume=True)
    assert result.resumed_from == 43
    assert result.failures == {"missing": 3} and result.records == 117
    report = photos.with_suffix(".failures.tsv").read_text().splitlines()
    assert [line.split("\t")[1] for line in report[1:]] == [str(i.key) for i in items[40:43]]


@pytest.mark.parametrize("cut", [0, 13, 4000, 9001, -1])
def test_resume_after_power_loss(photos: Path, cut: int) -> None:
    """The partial .rec cut at an arbitrary byte (a torn write), .idx ahead of it."""
    options = PackOptions(pass_through=True, pack_label=True)
    pack_list(photos, options)
    reference = outputs(photos)
    with pytest.raises(PackInterrupted):
        pack_list(photos, options, on_progress=interrupt_after(90))
    partial = photos.with_suffix(".rec.partial")
    size = partial.stat().st_size
    os.truncate(partial, size - 7 if cut < 0 else min(cut, size))
    pack_list(photos, options, resume=True)
    assert outputs(photos) == reference


@pytest.mark.slow
def test_resume_keeps_earlier_failures(odd: tuple[Path, dict[str, str]]) -> None:
    lst, cases = odd
    options = PackOptions(resize=16)
    full = pack_list(lst, options, root=lst.parent / "imgs")
    report = full.failure_report.read_text()  # type: ignore[union-attr]
    with pytest.raises(PackInterrupted):
        pack_list(
            lst, options, root=lst.parent / "imgs", on_progress=interrupt_after(len(cases) - 1)
        )
    again = pack_list(lst, options, root=lst.parent / "imgs", resume=True)
    assert again.failure_report is not None and again.failure_report.read_text() == report
    assert again.failures == full.failures


def test_resume_of_a_finished_pack_does_nothing(photos: Path) -> None:
    pack_list(photos, PackOptions(pass_through=True))
    again = pack_list(photos, PackOptions(pass_through=True), resume=True)
    assert again.already_done and again.records == 120


def test_resume_does_not_trust_a_finished_output_with_a_zeroed_tail(photos: Path) -> None:
    """Outputs are not synced to disk: after a power loss a finished .rec can
    keep its size with its tail zeroed. --resume must not call it done."""
    options = PackOptions(pass_through=True)
    pack_list(photos, options)
    reference = outputs(photos)
    rec = photos.with_suffix(".rec")
    data = rec.read_bytes()
    rec.write_bytes(data[:-100] + bytes(100))
    again = pack_list(photos, options, resume=True)
    assert not again.already_done and outputs(photos) == reference


def test_resume_with_other_options_is_refused(photos: Path) -> None:
    with pytest.raises(PackInterrupted):
        pack_list(photos, PackOptions(resize=24), on_progress=interrupt_after(30))
    with pytest.raises(
        DatasetError,
        match=r"the partial output was made with --resize 24 \(now 32\); run again with those, "
        "or with --overwrite instead of --resume to start over",
    ):
        pack_list(photos, PackOptions(resize=32), resume=True)
    lines = photos.read_text().splitlines(True)
    photos.write_text("".join(lines[:-1]))
    with pytest.raises(DatasetError, match=r"made from another version of ph.lst \(it changed"):
        pack_list(photos, PackOptions(resize=24), resume=True)
    result = pack_list(photos, PackOptions(resize=32))  # without --resume: starts over
    assert result.discarded_partial > 0 and result.resumed_from == 0
    assert not photos.with_suffix(".rec.partial").exists()


def test_disk_full_is_a_clear_error_and_resumable(
    photos: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = PackOptions(pass_through=True)
    pack_list(photos, options)
    reference = outputs(photos)
    real_writev, written = copying_module._writev, [0]

    def writev(fd: int, buffers: list[bytes]) -> int:
        size = sum(map(len, buffers))
        if size > 100_000 and written[0] > 2_000_000:  # the third .rec chunk
            raise OSError(errno.ENOSPC, "No space left on device")
        written[0] += size
        return real_writev(fd, buffers)

    monkeypatch.setattr(copying_module, "_writev", writev)
    big = photos.parent / "ph"
    for f in sorted(big.iterdir()):  # make the output large enough to fill "the disk"
        f.write_bytes(f.read_bytes() + bytes(30_000))
    with pytest.raises(DiskFullError, match=r"disk full while writing ph.rec.partial .*--resume"):
        pack_list(photos, options)
    assert photos.with_suffix(".rec.partial").stat().st_size > 0
    assert outputs(photos) == reference  # the earlier finished output is untouched
    monkeypatch.setattr(copying_module, "_writev", real_writev)
    result = pack_list(photos, options, resume=True)
    assert result.resumed_from > 0 and not result.already_done
    resumed = outputs(photos)
    pack_list(photos, options)  # a clean run over the same (grown) inputs
    assert outputs(photos) == resumed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"encoding": ".webp"}, "--encoding must be .jpg or .png"),
        ({"color": 2}, "--color must be 1, 0 or -1"),
        ({"resize": -1}, "--resize must be 0"),
        ({"quality": 101}, "--quality must be between 0 and 100"),
        (
            {"pass_through": True, "resize": 64, "center_crop": True},
            "--pass-through stores the files unchanged, so --resize, --center-crop cannot apply",
        ),
    ],
)
def test_bad_options(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PackOptions(**kwargs)  # type: ignore[arg-type]


def test_root_resolution(tmp_path: Path) -> None:
    lst = write_lst(tmp_path / "nowhere.lst", ["a.jpg"])
    with pytest.raises(
        MissingFileError,
        match=r"nowhere.lst: cannot find its image root \(.*nowhere is not a folder\); pass --root DIR",
    ):
        pack_list(lst, PackOptions())
    (tmp_path / "elsewhere").mkdir()
    photo(8, 8).save(tmp_path / "elsewhere" / "a.jpg")
    (tmp_path / "x.lists.json").write_text(
        json.dumps({"root": str(tmp_path / "elsewhere"), "lists": [{"path": "nowhere.lst"}]})
    )
    assert pack_list(lst, PackOptions(pass_through=True)).records == 1


@pytest.mark.slow
def test_pass_through_starts_without_pillow(photos: Path) -> None:
    import subprocess
    import sys

    probe = (
        "import sys\nfrom im2rec.cli import main\n"
        f"try:\n    main(['pack', {str(photos)!r}, '--pass-through', '-q', '--num-workers', '2'])\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "print('PIL' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == "False"
    assert photos.with_suffix(".rec").stat().st_size > 0


@pytest.mark.parametrize("workers", [1, 2])
def test_payloads_holding_the_magic_word_are_split_as_mxnet_writes_them(
    tmp_path: Path, workers: int
) -> None:
    """Workers tell the writer whether a record must be split (so it does
    not scan every image again): a wrong answer would write a record that
    readers cut at the magic word. Pass-through files with the magic word
    at aligned, unaligned and no offsets, small and large."""
    from im2rec.recordio import frame, pack
    from im2rec.recordio.framing import MAGIC_BYTES

    root = tmp_path / "files"
    root.mkdir()
    payloads = {
        "aligned.jpg": b"abcd" * 5
        + MAGIC_BYTES
        + b"x" * 9,  # aligned once the 24-byte header is on
        "unaligned.jpg": b"ab" + MAGIC_BYTES + b"y" * 7,
        "big_aligned.jpg": bytes(100_000) + MAGIC_BYTES + bytes(31) + MAGIC_BYTES,
        "plain.jpg": b"z" * 70_000,
    }
    for name, data in payloads.items():
        (root / name).write_bytes(data)
    lst = write_lst(tmp_path / "m.lst", list(payloads), [[1.0]] * len(payloads))
    with LocalExecutor(workers) as pool:
        pack_list(lst, PackOptions(pass_through=True), root=root, executor=pool)
    expected = b"".join(
        frame(pack((0, 1.0, key, 0), data)) for key, data in enumerate(payloads.values())
    )
    assert (tmp_path / "m.rec").read_bytes() == expected
    reader = IndexedRecordReader(tmp_path / "m.rec")
    assert [unpack(reader.read_key(k))[1] for k in range(4)] == list(payloads.values())


def test_a_file_too_large_for_a_record_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """2**29 bytes cannot be framed; the file is refused from its size (a
    sparse file here: reading it would take 512 MB), the rest is packed."""
    root = tmp_path / "r"
    root.mkdir()
    with open(root / "huge.jpg", "wb") as f:
        f.truncate(1 << 29)
    (root / "ok.jpg").write_bytes(b"small")
    lst = write_lst(tmp_path / "h.lst", ["huge.jpg", "ok.jpg"])
    result = pack_list(lst, PackOptions(pass_through=True), root=root)
    assert result.records == 1 and dict(result.failures) == {"record-too-large": 1}
    report = (tmp_path / "h.failures.tsv").read_text().splitlines()
    assert (
        report[1] == "1\t0\thuge.jpg\trecord-too-large\t536,870,912 bytes; RecordIO stores < 2**29"
    )


def test_a_list_being_packed_is_not_packed_twice_at_once(photos: Path) -> None:
    """A second run on the same list would write the same temporary files."""
    from click.testing import CliRunner

    from im2rec.cli import main
    from im2rec.storage.atomic import BusyError, exclusive

    with exclusive(photos, "packing"):  # as another process holds it
        with pytest.raises(BusyError, match="another process is packing it right now"):
            pack_list(photos, PackOptions(pass_through=True))
        result = CliRunner().invoke(main, ["pack", str(photos), "--pass-through", "-q"])
        assert result.exit_code == 1
        assert "ph.lst: another process is packing it right now; wait" in result.output
    assert not list(photos.parent.glob("ph.*partial*")) and not photos.with_suffix(".rec").exists()
