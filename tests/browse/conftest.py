"""What the tests of rec browse share: small recs (detection with a class
map; single labels with a record that is no image) and a real ``rec
browse`` process serving them, its cache in a folder of the test's."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from im2rec.recordio import IndexedRecordWriter, pack
from im2rec.recordio.detection import make_label

from ..conftest import photo

CLASSES = ["cat", "dog", "person"]


def _jpeg(w: int, h: int, seed: int) -> bytes:
    buf = io.BytesIO()
    photo(w, h, seed).save(buf, "JPEG", quality=90)
    return buf.getvalue()


@pytest.fixture(scope="module")
def recs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("browse")
    det = tmp / "det.rec"
    with IndexedRecordWriter(det) as w:
        for i in range(12):
            objects = [[i % 3, 0.25, 0.5, 0.75, 1.0, 0]] + (
                [[2, 0, 0, 0.5, 0.5, 0]] if i % 4 == 0 else []
            )
            label = make_label(objects, (64, 48))
            w.write_key(i, pack((len(label), label, i, 0), _jpeg(64, 48, i)))
    (tmp / "det.classes.tsv").write_text("".join(f"{k}\t{n}\n" for k, n in enumerate(CLASSES)))
    cls = tmp / "cls.rec"
    with IndexedRecordWriter(cls) as w:
        for i in range(5):
            payload = b"not an image" if i == 3 else _jpeg(300 if i == 0 else 40, 30, 100 + i)
            w.write_key(10 + i, pack((0, float(i % 2), i, 0), payload))
    return det, cls


class Server:
    def __init__(self, process: subprocess.Popen[str], address: str) -> None:
        self.process, self.address = process, address
        self.base, _, query = address.partition("/?")
        self.token = query.removeprefix("token=")
        self.host = self.base.removeprefix("http://")

    def get(self, path: str, token: bool = True, headers: dict[str, str] | None = None,
            method: str = "GET") -> tuple[int, dict[str, str], bytes]:  # fmt: skip
        sep = "&" if "?" in path else "?"
        url = f"{self.base}{path}{sep}token={self.token}" if token else f"{self.base}{path}"
        request = urllib.request.Request(url, headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.communicate(timeout=30)

    def json(self, path: str) -> object:
        status, _, body = self.get(path)
        assert status == 200, body
        return json.loads(body)


def launch(paths: list[str], cache: Path, env: dict[str, str] | None = None) -> Server:
    """``rec browse PATHS --port 0`` in a process of its own, its cache in ``cache``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "im2rec", "browse", *paths, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "IM2REC_CACHE_DIR": str(cache), **(env or {})},
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()  # (blocks until the address is printed)
    assert line.startswith("rec browse: http://127.0.0.1:"), line + process.stderr.read()
    return Server(process, line.split(": ", 1)[1].strip())


def scanned(server: Server, ds: int, images: bool = True) -> dict[str, object]:
    """The scan of dataset ``ds`` once done (polled; both passes with ``images``)."""
    deadline = time.monotonic() + 60
    key = "images_finished" if images else "finished"
    while not (scan := server.json(f"/api/scan?ds={ds}"))[key]:  # type: ignore[index]
        assert time.monotonic() < deadline and not scan["error"], scan  # type: ignore[index]
        time.sleep(0.05)
    return scan  # type: ignore[return-value]


@pytest.fixture(scope="module")
def server(recs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = launch([str(recs[0]), str(recs[1])], tmp_path_factory.mktemp("cache"))
    yield running
    running.stop()
