"""rec browse through the real command: its HTTP API (token, Host and
Origin checks, the Content-Security-Policy, read only), the grid's pages
and shuffle, thumbnails, a record that is no image, the payload's bytes,
the background class counts, Ctrl-C; and the page in a real headless
Chromium (Debian's, driven by Playwright): the grid, a class filter, a
record view whose box lies where its label puts it."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from im2rec.recordio import IndexedRecordReader, unpack

from .conftest import Server

pytest.importorskip("aiohttp")
pytestmark = pytest.mark.slow


def test_every_request_needs_the_token_host_and_origin(server: Server) -> None:
    status, headers, _ = server.get("/api/datasets", token=False)
    assert status == 403
    status, _, _ = server.get("/api/datasets?token=wrong", token=False)
    assert status == 403
    status, _, _ = server.get(
        "/api/datasets", headers={"Host": f"evil.example:{server.host.split(':')[1]}"}
    )
    assert status == 403  # (DNS rebinding: a foreign name that resolves here)
    status, _, _ = server.get("/api/datasets", headers={"Origin": "http://evil.example"})
    assert status == 403
    status, _, _ = server.get("/api/datasets", method="POST")
    assert status == 405
    status, headers, page = server.get("/")
    assert status == 200 and b"rec browse" in page
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    status, _, _ = server.get("/static/../records.py")
    assert status == 404


def test_the_grid_pages_shuffles_and_names(server: Server, recs: tuple[Path, Path]) -> None:
    sets = server.json("/api/datasets")["sets"]  # type: ignore[index]
    assert [d["name"] for d in sets] == ["det.rec", "cls.rec"]
    page = server.json("/api/records?ds=0&start=0&count=5")
    assert page["total"] == 12  # type: ignore[index]
    first = page["records"][0]  # type: ignore[index]
    assert first["key"] == 0 and first["names"] == ["cat", "person"]
    assert first["boxes"][0] == {"class": 0, "name": "cat", "box": [0.25, 0.5, 0.75, 1.0]}
    assert first["pixels"] == [64, 48] and first["format"] == "jpg"
    shuffled = server.json("/api/records?ds=0&start=0&count=12&seed=7")["records"]  # type: ignore[index]
    order = [r["position"] for r in shuffled]
    assert sorted(order) == list(range(12)) and order != list(range(12))
    assert order == [
        r["position"] for r in server.json("/api/records?ds=0&count=12&seed=7")["records"]
    ]  # type: ignore[index]
    status, _, _ = server.get("/api/records?ds=5")
    assert status == 400
    status, _, _ = server.get("/api/records?ds=0&count=100000")
    assert status == 400


def test_thumbnails_payloads_and_a_record_that_is_no_image(
    server: Server, recs: tuple[Path, Path]
) -> None:
    status, headers, body = server.get("/api/thumb?ds=1&i=0&size=64")  # (300 px: made smaller)
    assert status == 200 and headers["Content-Type"] == "image/jpeg"
    assert Image.open(io.BytesIO(body)).size == (64, 6)
    status, headers, body = server.get("/api/thumb?ds=0&i=2&size=64")  # (64 px: sent as it is)
    assert status == 200 and headers["Content-Type"] == "image/jpeg"
    assert body == unpack(IndexedRecordReader(recs[0])[2])[1]
    status, _, body = server.get("/api/thumb?ds=1&i=3")
    assert status == 422 and "error" in json.loads(body)
    reader = IndexedRecordReader(recs[1])
    status, _, body = server.get("/api/payload?ds=1&i=4")
    assert status == 200 and body == unpack(reader[4])[1]
    view = server.json("/api/record?ds=1&i=3")
    assert view["pixels"] is None and view["names"] == ["1"]  # type: ignore[index]


def test_class_counts_come_from_the_background_scan(server: Server) -> None:
    deadline = time.monotonic() + 30
    while not (scan := server.json("/api/scan?ds=0"))["finished"]:  # type: ignore[index]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    counts = {c["name"]: c["count"] for c in scan["classes"]}  # type: ignore[index]
    assert counts == {"cat": 4, "dog": 4, "person": 6}  # (4 first objects, 3 second; 8 has both)
    while not (single := server.json("/api/scan?ds=1"))["finished"]:  # type: ignore[index]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert {c["label"]: c["count"] for c in single["classes"]} == {0: 3, 1: 2}  # type: ignore[index]
    ones = server.json("/api/records?ds=1&class=1")
    assert [r["position"] for r in ones["records"]] == [1, 3]  # type: ignore[index]
    people = server.json("/api/records?ds=0&class=2&count=100")
    assert people["total"] == 6  # type: ignore[index]
    assert all("person" in r["names"] for r in people["records"])  # type: ignore[index]


def test_ctrl_c_stops_it_with_130(recs: tuple[Path, Path]) -> None:
    process = subprocess.Popen([sys.executable, "-m", "im2rec", "browse", str(recs[1]),
                                "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().startswith("rec browse:")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and "Traceback" not in err
    assert "Interrupted; nothing was written." in err


CHROMIUM = shutil.which("chromium")


def test_the_page_in_a_real_browser(server: Server, tmp_path: Path) -> None:
    """Headless Chromium: the grid loads, a class filter keeps its records,
    a record's box lies where its label puts it, a class's boxes hide, the
    augmentation preview draws, the charts show and filter, the datasets
    compare, the grid pages and scrolls. The screenshots go to
    ``IM2REC_SCREENSHOTS`` when set (docs/img: the docs page shows them)."""
    shots = Path(os.environ.get("IM2REC_SCREENSHOTS", tmp_path))
    if CHROMIUM is None:
        pytest.skip("no chromium (apt-get install chromium): the page is not tested in a browser")
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(server.address)
        page.wait_for_selector("#grid[data-loaded] .tile img")
        expect(page.locator("#grid .tile")).to_have_count(12)
        page.screenshot(path=str(shots / "browse-grid.png"))
        page.wait_for_selector("#classes li[data-label='2']")
        expect(page.locator("#progress")).to_have_text("12 records")
        expect(page.locator("#classes li[data-label='2']")).to_contain_text("person6")
        page.click("#classes li[data-label='2']")
        expect(page.locator("#grid .tile")).to_have_count(6)
        assert "class=2" in page.url
        page.locator("#grid .tile").first.click()
        page.wait_for_selector("#view:not([hidden]) #full")
        expect(page.locator("#full")).to_have_js_property("naturalWidth", 64)
        image = page.locator("#full").bounding_box()
        box = page.locator("#fullframe rect").first.bounding_box()
        assert image is not None and box is not None
        # the first object: cat at (0.25, 0.5)-(0.75, 1.0) of the image
        assert abs(box["x"] - (image["x"] + 0.25 * image["width"])) < 3
        assert abs(box["width"] - 0.5 * image["width"]) < 3
        assert abs(box["y"] - (image["y"] + 0.5 * image["height"])) < 3
        page.screenshot(path=str(shots / "browse-record.png"))
        page.click("#toggles input[data-name='cat']")  # (a class's boxes hidden)
        expect(page.locator("#fullframe rect[data-name='cat']")).to_have_class("off")
        page.click("#toggles input[data-name='cat']")
        page.fill("#augopts input[name='side']", "128")
        page.click("#augment")
        expect(page.locator("#draws .frame")).to_have_count(6)
        expect(page.locator("#draws")).to_have_attribute("data-kind", "detection")
        expect(page.locator("#draws .frame img").first).to_have_js_property("naturalWidth", 128)
        page.locator("#draws").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "browse-augment.png"))
        page.keyboard.press("ArrowRight")
        page.keyboard.press("Escape")
        page.go_back()
        expect(page.locator("#grid .tile")).to_have_count(12)
        expect(page.locator("#grid .tile .tag").first).to_have_text("cat")
        page.click("#stats")
        expect(page.locator("#panelbody .chart")).to_have_count(6)
        page.screenshot(path=str(shots / "browse-stats.png"))
        page.locator("#panelbody .chart rect.link").first.click()  # (the most: person)
        expect(page.locator("#grid .tile")).to_have_count(6)
        assert "class=2" in page.url
        page.click("#compare")
        expect(page.locator("#panelbody table.compare tr")).to_have_count(4)
        expect(page.locator("#panelbody table.compare tr").nth(1)).to_contain_text("cat43")
        page.screenshot(path=str(shots / "browse-compare.png"))
        page.keyboard.press("Escape")
        page.goto(server.address.replace("/?", "/?") + "#ds=0&start=0&count=5")
        expect(page.locator("#grid .tile")).to_have_count(5)
        page.click("#next")
        expect(page.locator("#where")).to_have_text("6-10 of 12")
        page.mouse.wheel(0, 3000)  # (scrolled: the header and its controls stay)
        page.click("#next")
        expect(page.locator("#grid .tile")).to_have_count(2)
        browser.close()
    assert not [e for e in errors if "Content Security Policy" in e], errors
    assert (shots / "browse-grid.png").stat().st_size > 0
