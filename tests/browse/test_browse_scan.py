"""rec browse's scan through the real command: the filters with counts
(broken label layouts, undecodable records, image size and aspect, with a
class), the charts' numbers, the scan kept so that a second run starts
with it (and not used once the file changed), and the augmentation
preview through the training path's augmenters."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.recordio.codec import MAGIC_BYTES
from im2rec.recordio.detection import make_label

from .conftest import Server, _jpeg, launch, scanned

pytest.importorskip("aiohttp")
pytestmark = pytest.mark.slow


def _records(server: Server, query: str) -> list[int]:
    page = server.json(f"/api/records?{query}&count=1000")
    return [r["position"] for r in page["records"]]  # type: ignore[index]


def test_filters_count_problems_sizes_and_aspects(server: Server) -> None:
    scan = scanned(server, 1)
    assert scan["undecodable"] == 1 and scan["broken"] == 0
    assert _records(server, "ds=1&problem=undecodable") == [3]
    # record 0 is 300 x 30, the others 40 x 30 (3 is no image)
    assert _records(server, "ds=1&side=256-512") == [0]
    assert _records(server, "ds=1&side=32-64") == [1, 2, 4]
    assert _records(server, "ds=1&aspect=2-1000000000") == [0]
    assert _records(server, "ds=1&aspect=1.1-1.34&class=1") == [1]
    shuffled = _records(server, "ds=1&side=32-64&seed=3")
    assert sorted(shuffled) == [1, 2, 4]
    assert server.get("/api/records?ds=1&side=9-3")[0] == 400
    assert server.get("/api/records?ds=1&problem=nasty")[0] == 400


def test_charts_count_what_the_scan_found(server: Server) -> None:
    scanned(server, 0)
    charts = server.json("/api/stats?ds=0")
    objects = {b["label"]: b["count"] for b in charts["objects"]["bars"]}  # type: ignore[index]
    assert objects["1"] == 9 and objects["2"] == 3  # (records 0, 4, 8 hold two)
    boxes = charts["boxes"]["bars"]  # type: ignore[index]
    assert sum(b["count"] for b in boxes) == 15
    # a 0.5 x 0.5 box: a side of 0.5 of the image's
    assert {b["label"]: b["count"] for b in boxes}["0.50"] == 15
    sides = {b["label"]: b["count"] for b in charts["sides"]["bars"]}  # type: ignore[index]
    assert sides["64-128"] == 12
    classes = {b["label"]: b["count"] for b in charts["classes"]["bars"]}  # type: ignore[index]
    assert classes == {"person": 6, "cat": 4, "dog": 4}
    sizes = charts["bytes"]["bars"]  # type: ignore[index]
    assert sum(b["count"] for b in sizes) == 12


def _settled(*paths: Path) -> None:
    """Wait (polling) until the files last changed 2 s ago: only then is a scan kept."""
    deadline = time.monotonic() + 10
    while time.time() - max(os.stat(p).st_ctime for p in paths) < 2.1:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _mixed(path: Path) -> Path:
    """A rec of multi-labels and detection labels, one of them broken; the
    last record split in two frames (its payload holds the magic word), as
    the walk gives it alone."""
    with IndexedRecordWriter(path) as w:
        for i in range(7):
            if i == 2:
                label = np.array([2, 5, 0, 0.1, 0.1, 0.5, 0.5, 1], np.float32)  # (a box cut short)
            elif i % 2:
                label = np.array([1, 4, 9], np.float32)
            else:
                label = make_label([[i, 0.1, 0.1, 0.9, 0.9, 0]], (80, 60))
            payload = _jpeg(80, 60, i)
            if i == 6:
                payload += bytes(-len(payload) % 4) + MAGIC_BYTES + b"tail"
            w.write_key(i, pack((len(label), label, i, 0), payload))
    return path


def test_the_scan_is_kept_for_the_next_run(tmp_path: Path) -> None:
    rec = _mixed(tmp_path / "mixed.rec")
    _settled(rec, rec.with_suffix(".idx"))
    cache = tmp_path / "cache"
    first = launch([str(rec)], cache)
    try:
        scan = scanned(first, 0)
        assert scan["broken"] == 1 and _records(first, "ds=0&problem=broken") == [2]
        deadline = time.monotonic() + 30
        while not first.json("/api/scan?ds=0")["kept"]:  # type: ignore[index]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        counts = {c["label"]: c["count"] for c in scan["classes"]}  # type: ignore[attr-defined]
        assert counts == {0: 1, 1: 3, 4: 4, 6: 1, 9: 3}
        assert _records(first, "ds=0&side=64-128") == list(range(7))
        sizes = first.json("/api/stats?ds=0")["bytes"]["bars"]  # type: ignore[index]
        assert sum(b["count"] for b in sizes) == 7
    finally:
        first.stop()
    kept = list((cache / "browse").iterdir())
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o077 == 0
    second = launch([str(rec)], cache)
    try:
        again = second.json("/api/scan?ds=0")
        assert again["kept"] and again["images_finished"]  # type: ignore[index]
        assert again["classes"] == scan["classes"]  # type: ignore[index]
        assert _records(second, "ds=0&problem=broken") == [2]
        assert _records(second, "ds=0&class=9") == [1, 3, 5]
    finally:
        second.stop()
    with open(rec, "r+b") as f:  # (the same size, one byte changed: not the same file)
        f.seek(40)
        byte = f.read(1)
        f.seek(40)
        f.write(bytes([byte[0] ^ 1]))
    third = launch([str(rec)], cache)
    try:
        assert not third.json("/api/scan?ds=0")["kept"]  # type: ignore[index]
    finally:
        third.stop()


def test_a_kept_scan_another_user_could_plant_is_not_used(tmp_path: Path) -> None:
    rec = _mixed(tmp_path / "mixed.rec")
    cache = tmp_path / "cache"
    (cache / "browse").mkdir(parents=True)
    os.chmod(cache / "browse", 0o777)  # (a folder anyone may write: nothing in it is trusted)
    server = launch([str(rec)], cache)
    try:
        scan = scanned(server, 0)
        assert not scan["kept"] and scan["broken"] == 1
    finally:
        server.stop()
    assert not list((cache / "browse").iterdir())


def test_the_augmentation_preview_draws_as_training_does(server: Server) -> None:
    found = server.json("/api/augment?ds=0&i=0&draws=4&seed=5&side=96")
    assert found["kind"] == "detection"  # type: ignore[index]
    draws = found["draws"]  # type: ignore[index]
    assert len(draws) == 4 and all(d["width"] == d["height"] == 96 for d in draws)
    for d in draws:
        status, headers, body = server.get(f"/api/drawn?n={d['image']}")
        assert status == 200 and Image.open(io.BytesIO(body)).size == (96, 96)
        for b in d["boxes"]:
            x0, y0, x1, y1 = b["box"]
            assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1 and b["name"] in ("cat", "person")
    again = server.json("/api/augment?ds=0&i=0&draws=4&seed=5&side=96")["draws"]  # type: ignore[index]
    assert [d["boxes"] for d in again] == [d["boxes"] for d in draws]  # (a seed: the same draws)
    plain = server.json(
        "/api/augment?ds=0&i=0&draws=2&rand_crop_prob=0&rand_pad_prob=0&rand_mirror_prob=0&side=64"
    )["draws"]  # type: ignore[index]
    assert plain[0]["boxes"][1]["box"] == pytest.approx([0, 0, 0.5, 0.5], abs=1e-6)
    mirrored = server.json(
        "/api/augment?ds=0&i=0&draws=1&rand_crop_prob=0&rand_pad_prob=0&rand_mirror_prob=1&side=64"
    )["draws"]  # type: ignore[index]
    assert mirrored[0]["boxes"][1]["box"] == pytest.approx([0.5, 0, 1, 0.5], abs=1e-6)
    classify = server.json("/api/augment?ds=1&i=1&draws=3&side=32")
    assert classify["kind"] == "classification"  # type: ignore[index]
    assert [d["boxes"] for d in classify["draws"]] == [[], [], []]  # type: ignore[index]
    status, _, body = server.get("/api/augment?ds=1&i=1&min_random_area=7")
    assert status == 400 and "min_random_area must be from" in json.loads(body)["error"]
    status, _, body = server.get("/api/augment?ds=1&i=1&kind=detection")
    assert status == 400 and "not a detection label" in json.loads(body)["error"]
    status, _, body = server.get("/api/augment?ds=1&i=3")
    assert status == 422


def _encoded(image: Image.Image, kind: str) -> bytes:
    buf = io.BytesIO()
    image.save(buf, kind)
    return buf.getvalue()


def test_the_preview_and_the_view_take_png_grey_and_broken_records(
    tmp_path: Path,
) -> None:
    """A PNG with alpha, a grey JPEG and a grey PNG are drawn as three-
    channel images of the side asked, in both kinds, the boxes where the
    label puts them; a label claiming to be a detection label whose layout
    is broken is reported, in the view as by the scan."""
    rgba = Image.new("RGBA", (80, 60), (200, 30, 40, 128))
    grey = Image.linear_gradient("L").resize((64, 64))
    payloads = [_encoded(rgba, "PNG"), _encoded(grey, "JPEG"), _encoded(grey, "PNG")]
    rec = tmp_path / "mixed.rec"
    box = [[1, 0.25, 0.25, 0.75, 0.75, 0]]
    with IndexedRecordWriter(rec) as w:
        for i, payload in enumerate(payloads):
            label = make_label(box, (64, 64))
            w.write_key(i, pack((len(label), label, i, 0), payload))
        broken = np.array([4, 6, 64, 64, 1, 0.1, 0.1, 0.9], np.float32)  # (ragged)
        w.write_key(3, pack((len(broken), broken, 3, 0), payloads[1]))
        past = np.array([9, 6, 64, 64, 1, 0.1, 0.1], np.float32)  # (A past the values)
        w.write_key(4, pack((len(past), past, 4, 0), payloads[1]))
    server = launch([str(rec)], tmp_path / "cache")
    try:
        for i in range(3):
            for kind in ("classification", "detection"):
                found = server.json(
                    f"/api/augment?ds=0&i={i}&kind={kind}&draws=2&side=48"
                    "&rand_crop_prob=0&rand_pad_prob=0&rand_mirror_prob=0&min_random_area=1"
                )
                assert found["kind"] == kind  # type: ignore[index]
                for d in found["draws"]:  # type: ignore[index]
                    assert d["width"] == d["height"] == 48
                    status, _, body = server.get(f"/api/drawn?n={d['image']}")
                    drawn = Image.open(io.BytesIO(body))
                    assert status == 200 and drawn.mode == "RGB" and drawn.size == (48, 48)
                    if kind == "detection":
                        assert d["boxes"][0]["box"] == pytest.approx([0.25] * 2 + [0.75] * 2,
                                                                     abs=1e-6)  # fmt: skip
        view = server.json("/api/record?ds=0&i=3")
        assert "not a whole number of 6-value objects" in view["broken"]  # type: ignore[index]
        assert view["boxes"] == []  # type: ignore[index]
        view = server.json("/api/record?ds=0&i=4")
        assert "header width A = 9 but the label has only 7" in view["broken"]  # type: ignore[index]
        assert scanned(server, 0)["broken"] == 2
        assert _records(server, "ds=0&problem=broken") == [3, 4]
    finally:
        server.stop()


def test_the_scan_gives_way_to_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a request of the page is in hand, the scan waits before its
    next block (so a grid shows at once, whatever the scan reads); once
    none is, it goes on, both passes, to the end."""
    import threading

    from im2rec.browse.priority import PageFirst
    from im2rec.browse.scanning import Scanner
    from im2rec.recordio import IndexedRecordReader

    monkeypatch.setenv("IM2REC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "d.rec"
    with IndexedRecordWriter(path) as w:
        for i in range(30):
            w.write_key(i, pack((0, float(i % 3), i, 0), _jpeg(32, 24, i)))
    scanner = Scanner(IndexedRecordReader(path), str(path))
    page, stop = PageFirst(most=120), threading.Event()
    deadline = time.monotonic() + 60
    with page.serving():
        scanner.start(stop, page)
        while not page.waiting:  # (polled: the scan reaches its first block)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert scanner.scan.done == 0 and not scanner.scan.finished
    while not scanner.scan.images_finished:
        assert time.monotonic() < deadline and not scanner.scan.error, scanner.scan
        time.sleep(0.01)
    assert scanner.scan.done == scanner.scan.images_done == 30
    assert scanner.scan.classes == {0: 10, 1: 10, 2: 10}
