"""Packing: records, geometry, failures as data, determinism, resume."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from im2rec.errors import ConfigError, MissingFileError
from im2rec.packing import DiskFullError, PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, unpack
from im2rec.storage import copying as copying_module

from ..conftest import photo, write_lst


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


def outputs(lst: Path) -> tuple[bytes, bytes]:
    return lst.with_suffix(".rec").read_bytes(), lst.with_suffix(".idx").read_bytes()


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
