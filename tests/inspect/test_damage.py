"""Damaged files, generated: whatever the damage, every reader and command
either works or fails with one of our errors (a clear message, a documented
exit code), never another exception; ``verify`` reports instead of failing."""

from __future__ import annotations

import io
import json
import shutil
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from PIL import Image

from im2rec.cli import main as cli
from im2rec.errors import Im2RecError
from im2rec.inspect.scanning import rebuild_index
from im2rec.inspect.summary import summarise
from im2rec.inspect.verifying import verify
from im2rec.recordio import (
    IndexedRecordReader,
    IndexedRecordWriter,
    RecordReader,
    build_index,
    load_index,
    pack,
    unpack,
)
from im2rec.recordio.framing import MAGIC_BYTES
from im2rec.training.dataset import RecordDataset
from im2rec.training.iterator import ImageRecordIter

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow


def _image(fmt: str, seed: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (12 + seed, 9), (seed * 40 % 256, 90, 200)).save(out, fmt)
    return out.getvalue()


def _jpeg_holding_the_magic_word(seed: int) -> bytes:
    """A valid JPEG with a comment segment holding the magic word where it
    falls 4-aligned in its record (after the 24-byte header): the record is
    written split, and still decodes."""
    jpeg = _image("JPEG", seed)
    pad = b"c" * (-(24 + 6) % 4)  # SOI + the COM marker and length, then the pad
    comment = pad + MAGIC_BYTES + b"tail"
    return jpeg[:2] + b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment + jpeg[2:]


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """A whole, valid file: JPEG and PNG records, and one written split
    around an aligned magic word. It verifies (images decoded) and iterates
    without a problem, so what goes wrong afterwards is the damage's doing."""
    path = tmp_path_factory.mktemp("damage") / "base.rec"
    payloads = [
        pack((0, 1.0, 0, 0), _image("JPEG", 1)),
        pack((0, 2.0, 1, 0), _image("PNG", 2)),
        pack((0, 3.0, 2, 0), _jpeg_holding_the_magic_word(3)),
        pack((0, 4.0, 3, 0), _image("JPEG", 5)),
        pack((0, 5.0, 4, 0), _image("JPEG", 4)),
    ]
    with IndexedRecordWriter(path) as w:
        for key, payload in enumerate(payloads):
            w.write_key(key, payload)
    report = verify(path, decode=True)
    assert report.ok and report.records == report.decoded == 5, report.problems
    assert sum(1 for _ in _frame_words(path.read_bytes())) == 6  # one record is split in two
    with ImageRecordIter(path_imgrec=str(path), data_shape=(3, 8, 8), batch_size=5,
                         preprocess_threads=1, verbose=False) as it:  # fmt: skip
        assert it.next().label[0].tolist() == [1, 2, 3, 4, 5]
    return path.read_bytes(), path.with_suffix(".idx").read_bytes()


def _frame_words(data: bytes) -> Iterator[int]:
    """The offset of every frame header (each part of a split record too)."""
    pos = 0
    while pos < len(data):
        yield pos
        pos += 8 + ((struct.unpack_from("<I", data, pos + 4)[0] & (2**29 - 1)) + 3) // 4 * 4


def _near_a_frame(data: bytes, draw: st.DrawFn) -> int:
    """A position in ``data``, most often at or just around a frame header
    (where damage is subtle: a cut right after a part, a wrong length)."""
    heads = [i for i in range(0, len(data) - 3, 4) if data[i : i + 4] == MAGIC_BYTES]
    if not heads or draw(st.booleans()):
        return draw(st.integers(0, len(data) - 1))
    pos = draw(st.sampled_from(heads)) + draw(st.integers(-8, 12))
    return min(max(pos, 0), len(data) - 1)


def _damage(data: bytes, draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["truncate", "bytes", "words"]))
    if kind == "truncate":
        return data[: _near_a_frame(data, draw)]
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        if kind == "bytes":
            out[_near_a_frame(data, draw)] = draw(st.integers(0, 255))
        else:  # plausible frame words: a magic, or a length word with any flag
            pos = min(_near_a_frame(data, draw) // 4 * 4, len(out) - 4)
            word = draw(
                st.one_of(
                    st.just(MAGIC_BYTES),
                    st.builds(
                        lambda cflag, n: struct.pack("<I", cflag << 29 | n),
                        st.integers(0, 3),
                        st.integers(0, 2**29 - 1) | st.integers(0, 64),
                    ),
                )
            )
            out[pos : pos + 4] = word
    return bytes(out)


@st.composite
def damaged(draw: st.DrawFn, original: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    """The .rec damaged, or one line of the .idx replaced."""
    rec, idx = original
    if draw(st.booleans()):
        return _damage(rec, draw), idx
    lines = idx.decode().splitlines(keepends=True)
    i = draw(st.integers(0, len(lines) - 1))
    lines[i] = draw(st.sampled_from(["", "x\ty\n", "1\t3\n", "9\t-4\n", "2\t99999\n", "0\t0\n"]))
    return rec, "".join(lines).encode()


def _frame_changed(orig: bytes, now: bytes, at: int) -> bool:
    """Whether the frame at ``at`` changed in a way the format can show. A
    length word changed within the record's padding (657 to 658 bytes: both
    pad to 660) with the same flag leaves a valid chain of frames: the payload
    only gains a pad byte or loses up to three bytes at its end, which a JPEG
    decoder may not notice either. No checksum tells that from the original."""
    if now[at : at + 8] == orig[at : at + 8]:
        return False
    if now[at : at + 4] != orig[at : at + 4]:
        return True
    (was,), (got,) = struct.unpack_from("<I", orig, at + 4), struct.unpack_from("<I", now, at + 4)
    mask = (1 << 29) - 1
    same_chain = was >> 29 == got >> 29 and (was & mask) + 3 >> 2 == (got & mask) + 3 >> 2
    return not same_chain


def _ours_or_nothing(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Im2RecError:
        return None


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_damage_fails_only_with_our_errors(
    original: tuple[bytes, bytes], tmp_path: Path, data: st.DataObject
) -> None:
    rec_bytes, idx_bytes = data.draw(damaged(original))
    work = tmp_path / "case"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    rec, idx = work / "d.rec", work / "d.idx"
    rec.write_bytes(rec_bytes)
    idx.write_bytes(idx_bytes)

    report = verify(rec, decode=True)  # reports, never raises, for any .rec damage
    orig_rec, orig_idx = original
    framing_damaged = len(rec_bytes) < len(orig_rec) or any(
        _frame_changed(orig_rec, rec_bytes, i) for i in _frame_words(orig_rec)
    )
    if framing_damaged or idx_bytes != orig_idx:  # what such damage must cause
        assert not report.ok, "verify missed damage to a frame word, the length or the .idx"
        assert any(p.offset is not None or ".idx" in p.message for p in report.problems)
        event("damage reported")
    _ours_or_nothing(lambda: list(RecordReader(rec)))
    _ours_or_nothing(lambda: build_index(RecordReader(rec)))
    index, _damages = rebuild_index(rec, recover=True)
    assert len(index) == report.records
    _ours_or_nothing(rebuild_index, rec, keys="id")
    _ours_or_nothing(summarise, rec)

    def read_everything() -> None:
        reader = IndexedRecordReader(rec)
        for i in range(len(reader)):
            _ours_or_nothing(lambda i=i: unpack(reader[i]))
        dataset = RecordDataset(rec, output="numpy")
        for i in range(len(dataset)):
            _ours_or_nothing(dataset.__getitem__, i)

    _ours_or_nothing(read_everything)

    def iterate(on_corrupt: str, path_imgidx: str) -> None:
        with ImageRecordIter(
            path_imgrec=str(rec), path_imgidx=path_imgidx, data_shape=(3, 8, 8), batch_size=2,
            preprocess_threads=1, on_corrupt=on_corrupt, verbose=False,
        ) as it:  # fmt: skip
            for batch in it:
                assert batch.data[0].shape == (2, 3, 8, 8)

    for on_corrupt in ("raise", "skip"):
        for path_imgidx in (str(idx), ""):
            _ours_or_nothing(iterate, on_corrupt, path_imgidx)

    runner = CliRunner()
    for args in (
        ["verify", "--decode", str(rec)],
        ["info", str(rec)],
        ["index", str(rec), "-o", str(work / "new.idx")],
        ["unpack", str(rec), str(work / "out")],
        ["show", str(rec), "-o", str(work / "sheet.png")],
        ["merge", str(rec), str(rec), "-o", str(work / "merged.rec"), "--renumber"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code in (0, 1), (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            result.exception,
        )
    if (work / "merged.rec").exists():  # never a merged file that is not whole
        merged = verify(work / "merged.rec")
        assert merged.ok and merged.records == 2 * len(load_index(idx)), merged.problems


# ---- .lst files and image folders -------------------------------------------

_IMAGES = {
    "a.jpg": lambda: _image("JPEG", 5),
    "b.png": lambda: _image("PNG", 6),
    "png-named.jpg": lambda: _image("PNG", 7),
    "cut.jpg": lambda: _image("JPEG", 8)[:60],
    "empty.jpg": lambda: b"",
    "text.jpg": lambda: b"not an image at all",
    "sub dir/\u00e9t\u00e9 \u2028x.jpg": lambda: _image("JPEG", 9),
}


@pytest.fixture(scope="module")
def image_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lst") / "images"
    for name, make in _IMAGES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(make())
    return root


_field = st.one_of(
    st.sampled_from(["0", "1", "-1", "2.5", "1e3", "nan", "inf", "1_0", "0x10", "", " 3 ", "x"]),
    st.integers(0, 2**70).map(str),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
)
_path = st.one_of(
    st.sampled_from([*_IMAGES, "missing.jpg", "../images/a.jpg", "/etc/hostname", "", " a.jpg"]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=6),
)


@st.composite
def lst_texts(draw: st.DrawFn) -> str:
    lines = []
    for i in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 9)):  # mostly well-formed lines
            labels = draw(
                st.lists(st.sampled_from(["0", "1", "2.5", "-3"]), min_size=1, max_size=3)
            )
            fields = [str(draw(st.sampled_from([i, i, i, 0, 2**64 - 1]))), *labels, draw(_path)]
        else:
            fields = draw(st.lists(st.one_of(_field, _path), max_size=5))
        sep = draw(st.sampled_from(["\t"] * 6 + [" \t ", "  "]))
        lines.append(sep.join(fields) + draw(st.sampled_from(["\n"] * 4 + ["\r\n", "\t\n"])))
    if lines and draw(st.booleans()):
        lines[-1] = lines[-1].rstrip("\r\n")  # no newline at the end of the file
    return "".join(lines)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=lst_texts(), options=st.sampled_from([["--pass-through"], ["--resize", "8"]]))
def test_any_lst_packs_or_fails_clearly(
    image_root: Path, tmp_path: Path, text: str, options: list[str]
) -> None:
    work = tmp_path / "case"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    lst = work / "d.lst"
    lst.write_text(text, encoding="utf-8", newline="")
    args = ["pack", str(lst), "--root", str(image_root), "--num-workers", "1", "-q", *options]
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1, 2), result.output
    event(f"exit {result.exit_code}")
    if result.exit_code:
        assert "Error: " in result.output and not (work / "d.rec").exists()
        return
    # pass-through stores bytes undecoded (as im2rec.py): only re-encoded records must decode
    report = verify(work / "d.rec", decode=options != ["--pass-through"])
    assert report.ok, report.problems
    manifest = json.loads((work / "d.pack.json").read_text())
    assert manifest["records"] == report.records


# ---- an interrupted pack, its partial files damaged as a power loss would ---


@pytest.fixture(scope="module")
def packing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A list of 30 photos (some missing, so the failure report has lines);
    what an uninterrupted run makes of it is kept as ref.rec and ref.idx."""
    from im2rec.packing import PackOptions, pack_list

    from ..conftest import photo_folder, write_lst

    folder = tmp_path_factory.mktemp("packing")
    names = photo_folder(folder / "ph", 30, lambda i: (20 + i, 16 + i % 7), "p{i:02d}.jpg")
    names[7] = names[19] = "gone.jpg"
    lst = write_lst(folder / "ph.lst", names)
    result = pack_list(lst, PackOptions(pass_through=True))
    result.rec.rename(folder / "ref.rec")
    result.idx.rename(folder / "ref.idx")
    return lst


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    stop=st.integers(1, 29),
    name=st.sampled_from(
        ["ph.rec.partial", "ph.idx.partial", "ph.failures.tsv.partial", "ph.rec.partial.json"]
    ),
    how=st.sampled_from(["cut", "zero tail", "garbage"]),
    where=st.floats(0, 1),  # a fraction of the file, so no draw depends on it
    garbage=st.binary(min_size=1, max_size=64),
)
def test_resume_after_any_torn_write_gives_the_same_bytes(
    packing: Path,
    stop: int,
    name: str,
    how: str,
    where: float,
    garbage: bytes,
) -> None:
    """Power loss leaves a partial file cut short, its tail zeroed, or
    garbage after its end; the state file may be torn too. --resume must
    still end in the bytes of an uninterrupted run, or refuse clearly."""
    from im2rec.packing import PackInterrupted, PackOptions, pack_list

    lst = packing
    reference = ((lst.parent / "ref.rec").read_bytes(), (lst.parent / "ref.idx").read_bytes())
    for stale in lst.parent.glob("ph.*"):
        if stale.suffix != ".lst":
            stale.unlink()
    options = PackOptions(pass_through=True)

    def interrupt(done: int, _total: int, _bytes: int) -> None:
        if done == stop:
            raise KeyboardInterrupt

    with pytest.raises(PackInterrupted):
        pack_list(lst, options, on_progress=interrupt)
    path = lst.parent / name
    content = path.read_bytes()
    cut = int(where * len(content))
    if how == "cut":
        content = content[:cut]
    elif how == "zero tail":
        content = content[:cut] + bytes(len(content) - cut)
    else:
        content = content[:cut] + garbage
    path.write_bytes(content)
    try:
        pack_list(lst, options, resume=True)
    except Im2RecError:
        assert not lst.with_suffix(".rec").exists()  # a clear refusal, nothing that looks done
        return
    assert (lst.with_suffix(".rec").read_bytes(), lst.with_suffix(".idx").read_bytes()) == reference
