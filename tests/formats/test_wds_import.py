"""``rec import webdataset``'s record-making rules: the shortcut for the
``.json`` that ``rec export`` writes gives what the general path gives, and
labels from other people's shards that do not fit a record are skipped and
reported, not a traceback and not a silently wrong record."""

from __future__ import annotations

import struct
import tarfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from im2rec.formats import wds_import
from im2rec.formats.tars import Sample
from im2rec.formats.wds_export import _header_json, export_webdataset
from im2rec.formats.wds_import import _exported_fast, _general, import_webdataset
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, pack, unpack
from im2rec.recordio.framing import MAGIC_BYTES
from im2rec.storage.files import FileRange

from .conftest import hostile, image

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(40))


def _sample(meta: bytes, image_field: str | None = "jpg", cls: bytes | None = b"1") -> Sample:
    fields: dict[str, bytes] = {}
    if image_field is not None:
        fields[image_field] = JPEG
    if cls is not None:
        fields["cls"] = cls
    fields["json"] = meta
    return Sample("k", "s.tar", dict(fields))


def _float32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


U64 = st.integers(0, (1 << 64) - 1)


@given(
    label=st.floats(allow_nan=False, allow_infinity=False, width=32),
    rid=U64,
    id2=U64,
    key=st.none() | U64,
    number=st.integers(0, 1000),
)
def test_the_shortcut_takes_what_export_writes_and_agrees(
    label: float, rid: int, id2: int, key: int | None, number: int
) -> None:
    sample = _sample(_header_json(0, [label], rid, id2, key))
    fast = _exported_fast(sample, number)
    assert fast is not None  # every single-label json rec export writes takes the shortcut
    assert fast == _general(sample, None, number)
    assert fast[0] == (number if key is None else key)
    assert fast[1] == pack((0, label, rid, id2), b"")


NUMBERS = st.sampled_from(
    [b"0", b"-0", b"1", b"01", b"1.5", b"1.", b".5", b"1e3", b"1E+3", b"1e-3", b"-2.25e1",
     b"3.5e38", b"3.5e39", b"1e400", b"1" + b"0" * 60, b"1" + b"0" * 400, b"NaN", b"Infinity",
     b"\xd9\xa1", b"1_0", b"0x10", b" 1", b"true"]
)  # fmt: skip
WHOLES = st.sampled_from(
    [b"0", b"7", b"007", b"-1", b"1.0", b"18446744073709551615", b"18446744073709551616",
     b"99999999999999999999", b"null", b"1e3", b'"5"']
)  # fmt: skip


@given(
    label=NUMBERS,
    rid=WHOLES,
    id2=WHOLES,
    key=WHOLES,
    flag=st.sampled_from([b"0", b"1", b"00"]),
    fields=st.sampled_from([("jpg", b"1"), ("png", None), (None, b"2"), ("txt", b"1")]),
)
def test_the_shortcut_never_disagrees_with_the_general_path(
    label: bytes,
    rid: bytes,
    id2: bytes,
    key: bytes,
    flag: bytes,
    fields: tuple[str | None, bytes | None],
) -> None:
    meta = b'{"flag":%s,"label":[%s],"id":%s,"id2":%s,"key":%s}' % (flag, label, rid, id2, key)
    sample = _sample(meta, *fields)
    fast = _exported_fast(sample, 3)
    if fast is not None:
        assert fast == _general(sample, None, 3)


def test_two_images_or_a_refused_image_are_not_taken_as_export_wrote_them() -> None:
    meta = _header_json(0, [1.0], 5, 0, 5)
    two = Sample("k", "s.tar", {"jpg": JPEG, "png": b"\x89PNG", "json": meta})
    assert _exported_fast(two, 0) is None
    assert _general(two, None, 0)[2] == JPEG  # the first image
    refused = Sample("k", "s.tar", {"json": meta}, skipped={"jpg": "not a regular file"})
    assert _exported_fast(refused, 0) is None
    assert _general(refused, None, 0) == "no image: jpg: not a regular file"
    empty = Sample("k", "s.tar", {"json": meta})  # a record without payload, as exported
    assert _exported_fast(empty, 0) == _general(empty, None, 0)
    assert _general(empty, None, 0)[2] == b""


def test_labels_that_fit_no_record_are_skipped_and_reported(tmp_path: Path) -> None:
    huge = b"1" + b"0" * 400  # a whole number past a float's range
    shard = hostile(tmp_path / "labels.tar", [
        ("a.jpg", tarfile.REGTYPE, JPEG),
        ("a.json", tarfile.REGTYPE, b'{"flag":0,"label":[%s],"id":0,"id2":0,"key":0}' % huge),
        ("b.jpg", tarfile.REGTYPE, JPEG),
        ("b.json", tarfile.REGTYPE, b'{"flag":0,"label":[1e39],"id":1,"id2":0,"key":1}'),
        ("c.jpg", tarfile.REGTYPE, JPEG), ("c.json", tarfile.REGTYPE, b'{"class":%s}' % huge),
        ("d.jpg", tarfile.REGTYPE, JPEG), ("d.cls", tarfile.REGTYPE, b"9" * 60),
        ("e.jpg", tarfile.REGTYPE, JPEG), ("e.cls", tarfile.REGTYPE, b"4"),
        ("f.jpg", tarfile.SYMTYPE, b""),
        ("f.json", tarfile.REGTYPE, b'{"flag":0,"label":[2.0],"id":5,"id2":0,"key":5}'),
    ])  # fmt: skip
    result = import_webdataset([str(shard)], tmp_path / "out")
    assert result.records == 1
    assert result.skipped == {"bad json": 1, "bad label": 2, "no image": 1, "no label": 1}
    assert result.report is not None
    report = result.report.read_text()
    assert "\tb\tbad label: header label 1e+39 cannot be stored as float32" in report
    assert "\tf\tno image: jpg: not a regular file" in report
    c = Sample("c", str(shard), {"jpg": JPEG, "json": b'{"class":%s}' % huge})
    assert str(_general(c, "class", 0)).startswith("no label: no number")
    ((header, payload),) = [unpack(r) for r in IndexedRecordReader(tmp_path / "out.rec")]
    assert header.label == 4.0 and payload == JPEG


def test_round_trip_without_the_shortcut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = tmp_path / "d.rec"
    with IndexedRecordWriter(rec) as w:
        for i in range(6):
            w.write_key(10 + i, pack((0, _float32(i / 3), i, i), image("JPEG", i)))
        w.write_key(20, pack((0, 1.0, 6, 0), b"ab" + MAGIC_BYTES * 3))  # split
    shards = export_webdataset(rec, str(tmp_path / "s-%03d.tar")).shards
    monkeypatch.setattr(wds_import, "_exported_fast", lambda sample, number: None)
    import_webdataset(shards, tmp_path / "back")
    assert (tmp_path / "back.rec").read_bytes() == rec.read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == rec.with_suffix(".idx").read_bytes()


@pytest.mark.parametrize("batch", [1 << 20, 50_000])
def test_copies_and_writes_from_memory_land_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Records larger than a chunk (copied by the kernel on the copying
    thread), image-sized ones written at once from the chunk that read them,
    and small ones gathered into batches, interleaved: both writers keep
    them in order, so the round trip is byte-identical."""
    from im2rec.formats import tars, tarwriter
    from im2rec.recordio import writer
    from im2rec.recordio.chunks import Chunks

    monkeypatch.setattr(Chunks, "SIZE", 3 * tars.RANGE_FROM)
    monkeypatch.setattr(tarwriter, "_BATCH", batch)
    monkeypatch.setattr(writer, "_BUFFER", batch)
    sizes = [100, tars.RANGE_FROM + 5, 7 * tars.RANGE_FROM, 3, tars.RANGE_FROM * 2 + 1] * 4
    rec = tmp_path / "d.rec"
    with IndexedRecordWriter(rec) as w:
        for i, size in enumerate(sizes):
            payload = JPEG + bytes([i]) * size
            w.write_key(i, pack((0, float(i), i, 0), payload))
    shards = export_webdataset(rec, str(tmp_path / "s-%03d.tar"), maxcount=7).shards
    got = [s for shard in shards for s in tars.samples(shard)]
    assert [type(s.fields["jpg"]) for s in got] == [
        bytes if size < tars.RANGE_FROM else FileRange for size in sizes
    ]
    import_webdataset(shards, tmp_path / "back")
    assert (tmp_path / "back.rec").read_bytes() == rec.read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == rec.with_suffix(".idx").read_bytes()
