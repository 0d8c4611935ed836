"""rec browse of a .rec in a bucket (a real S3-compatible server on
localhost): the grid reads only the records it shows, and the scan, which
reads the whole file, runs only when the page asks for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import launch, scanned

pytest.importorskip("aiohttp")
pytestmark = pytest.mark.slow


def test_a_remote_rec_is_scanned_only_when_asked(
    s3: Any, recs: tuple[Path, Path], tmp_path: Path
) -> None:
    for suffix in (".rec", ".idx"):
        s3.upload_file(str(recs[0].with_suffix(suffix)), "data", f"browse/det{suffix}")
    server = launch(["s3://data/browse/det.rec"], tmp_path / "cache")
    try:
        page = server.json("/api/records?ds=0&count=3")
        assert [r["key"] for r in page["records"]] == [0, 1, 2]  # type: ignore[index]
        status, _, _ = server.get("/api/thumb?ds=0&i=1&size=64")
        assert status == 200
        scan = server.json("/api/scan?ds=0")
        assert not scan["started"] and scan["done"] == 0  # type: ignore[index]
        assert server.json("/api/records?ds=0&class=2")["pending"]  # type: ignore[index]
        server.json("/api/scan?ds=0&start=1")
        scan = scanned(server, 0)
        assert {c["label"]: c["count"] for c in scan["classes"]} == {0: 4, 1: 4, 2: 6}  # type: ignore[attr-defined]
    finally:
        server.stop()
