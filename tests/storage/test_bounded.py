"""Servers that lie or stall (docs/security.md, "Servers"): a missing size
is one clear error, at most the bytes asked for are read, a quiet or
trickling server is given up within the limits and the error names the
URL, and bucket keys that are no plain paths never become list lines.

The server here is a real HTTP server on localhost that misbehaves on
purpose; the S3 case runs against the real S3 protocol (moto's server)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

from im2rec.errors import Im2RecError  # noqa: E402
from im2rec.recordio import IndexedRecordWriter, RecordReader, pack  # noqa: E402
from im2rec.storage import bounded, remote  # noqa: E402

from ..test_resources import LIMIT, one_error  # noqa: E402


class _Hostile(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _range(self, data: bytes) -> tuple[int, int]:
        ranged = self.headers.get("Range", "")
        a, _, b = ranged.removeprefix("bytes=").partition("-")
        return int(a or 0), min(int(b) if b else len(data) - 1, len(data) - 1)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        name = self.path.rsplit("/", 1)[-1]
        if name.startswith("silent"):
            time.sleep(30)
            return
        data = self.files[name.split("-", 1)[-1]]
        self.send_response(200)
        if not name.startswith("nolength"):
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        name = self.path.rsplit("/", 1)[-1]
        kind, _, real = name.partition("-")
        if kind == "silent":
            time.sleep(30)
            return
        data = self.files[real]
        start, end = self._range(data)
        try:
            if kind == "nolength":  # a whole body with no size at all
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
            elif kind == "endless":  # the range asked for, then zeros for ever
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data[start : end + 1])
                while True:
                    self.wfile.write(bytes(1 << 16))
            elif kind == "trickle":  # a byte at a time, slowly
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                for i in range(start, end + 1):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(0.3)
            elif kind == "norange":  # the whole object whatever was asked
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif kind in ("superset", "before", "unsaid", "multipart"):
                # a range that holds the one asked for, starts before it, or says nothing
                first = max(0, start - 100) if kind in ("superset", "before") else start
                last = min(len(data) - 1, end + 100) if kind == "superset" else end
                self.send_response(206)
                if kind in ("superset", "before"):
                    self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
                if kind == "multipart":
                    self.send_header("Content-Type", "multipart/byteranges; boundary=x")
                self.send_header("Content-Length", str(last - first + 1))
                self.end_headers()
                self.wfile.write(data[first : last + 1])
            else:
                raise AssertionError(kind)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


def make_rec(path: Path, n: int = 40) -> Path:
    with IndexedRecordWriter(path) as w:
        for i in range(n):
            w.write_key(i, pack((0, float(i), i, 0), os.urandom(500 + 37 * i)))
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("served")
    rec, big = make_rec(folder / "set.rec"), make_rec(folder / "big.rec", 400)
    _Hostile.files = {
        p.name: p.read_bytes() for r in (rec, big) for p in (r, r.with_suffix(".idx"))
    }
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", rec
    finally:
        httpd.shutdown()
        httpd.server_close()


def rec_cmd(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``rec ARGS`` limited to 1 GiB of address space, with extra ``env``."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "im2rec", *args],
        preexec_fn=limit,  # noqa: PLW1509 - no threads are started before the fork here
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "MALLOC_ARENA_MAX": "2", **env},
    )  # fmt: skip


@pytest.mark.slow
def test_an_object_without_a_size_is_one_error(server: tuple[str, Path]) -> None:
    url = f"{server[0]}/nolength-set.rec"
    error = one_error(rec_cmd("info", url))
    assert url in error and "did not say how large" in error


@pytest.mark.slow
def test_an_endless_body_is_read_only_as_far_as_asked(server: tuple[str, Path]) -> None:
    base, rec = server
    url = f"{base}/endless-set.rec"
    proc = rec_cmd("verify", url, "--json")
    assert proc.returncode == 0, proc.stderr
    assert list(RecordReader(url)) == list(RecordReader(rec))


@pytest.mark.slow
def test_a_server_that_ignores_ranges_still_gives_the_records(server: tuple[str, Path]) -> None:
    base, rec = server
    assert list(RecordReader(f"{base}/norange-set.rec")) == list(RecordReader(rec))


@pytest.mark.parametrize("kind", ["superset", "before", "unsaid", "multipart"])
@pytest.mark.slow
def test_bytes_other_than_those_asked_for_are_refused(
    server: tuple[str, Path], tmp_path: Path, kind: str
) -> None:
    """A partial response must say it holds exactly the range asked for: a
    superset (key 1500 had read as another record), a range that starts
    earlier, or none said, is one error naming the URL, whether read
    directly, by `rec verify`, or through the block cache, where nothing of
    it is kept for the next run."""
    from im2rec.storage.blockcache import BlockCache
    from im2rec.training.dataset import RecordDataset

    url = f"{server[0]}/{kind}-big.rec"  # (3 MB: reads by key are ranges past its start)
    with pytest.raises(bounded.WrongRange, match=rf"{kind}-big.(rec|idx): asked for bytes"):
        RecordDataset(url, output="bytes")[300]
    error = one_error(rec_cmd("show", url, "-o", str(tmp_path / "s.png"), "-n", "2",
                              "--random"))  # fmt: skip
    assert url in error and "not the bytes asked for" in error
    cache = BlockCache(str(tmp_path / "cache"), block_bytes=1 << 16, budget=1 << 22)
    with pytest.raises(bounded.WrongRange):
        RecordDataset(url, output="bytes", cache=cache)[300]
    real = _Hostile.files["big.rec"]
    for block in (tmp_path / "cache").rglob("*.blk"):  # (a range from byte 0 may be right)
        first, last = map(int, block.stem.split("-"))
        assert block.read_bytes() == real[first:last]


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(0, 1 << 20),
    length=st.integers(1, 1 << 20),
    first=st.integers(0, 1 << 21),
    last=st.integers(0, 1 << 21),
    total=st.one_of(st.none(), st.integers(0, 1 << 22)),
)
def test_a_partial_response_is_taken_only_for_the_range_asked(
    start: int, length: int, first: int, last: int, total: int | None
) -> None:
    """``Content-Range: bytes FIRST-LAST/TOTAL`` answers bytes START..END-1
    only when it is that range, or its part before the object's end."""
    end = start + length
    said = f"bytes {first}-{last}/{'*' if total is None else total}"
    exact = first == start and last == end - 1 and (total is None or last < total)
    at_the_end = first == start and total is not None and first <= last == total - 1 < end - 1
    try:
        got = bounded._partial("u", said, start, end)
    except bounded.WrongRange:
        assert not (exact or at_the_end)
    else:
        assert exact or at_the_end
        assert got == (last - first + 1, total)


@pytest.mark.slow
def test_a_trickling_server_is_given_up_and_named(server: tuple[str, Path]) -> None:
    url = f"{server[0]}/trickle-set.rec"
    t0 = time.monotonic()
    proc = rec_cmd("info", url, IM2REC_READ_DEADLINE="2", IM2REC_IDLE_TIMEOUT="1")
    elapsed = time.monotonic() - t0
    error = one_error(proc)
    assert url in error and "stalled" in error and elapsed < 30, (elapsed, error)


@pytest.mark.slow
def test_a_silent_server_is_given_up(server: tuple[str, Path]) -> None:
    url = f"{server[0]}/silent-set.rec"
    with pytest.raises(bounded.Stalled, match="silent-set.rec: .* stalled"):
        remote.RemoteView.open(url, {"timeouts": {"connect": 1, "idle": 1, "read": 2}})


@pytest.mark.slow
def test_a_refused_connection_is_not_a_hang() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(Im2RecError):
        remote.RemoteView.open(f"http://127.0.0.1:{port}/x.rec", {"timeouts": {"read": 3}})
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("timeouts", [{"read": 0}, {"idle": -1}, {"connect": "soon"}, {"total": 3}])
def test_timeouts_are_checked(timeouts: dict[str, Any]) -> None:
    with pytest.raises(Im2RecError, match="timeout"):
        bounded.timeouts_of({"timeouts": timeouts})


def test_timeouts_come_from_options_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IM2REC_IDLE_TIMEOUT", "7")
    limits = bounded.timeouts_of({"timeouts": {"read": 9}})
    assert (limits.connect, limits.idle, limits.read) == (10.0, 7.0, 9.0)


# -- bucket keys that are no plain paths ----------------------------------------
