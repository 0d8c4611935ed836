"""Local HTTP servers for the tests and bench_stream.py.

:func:`serving`: files from a folder with byte ranges, an ETag that changes
with the file (or only a Last-Modified), and a count of the GET requests
each path received.
:func:`proxying`: a reverse proxy in front of another local server (an S3
server, for clients that speak only S3). Both can add a fixed latency to
every request and cap each response's bandwidth: what a far object store
costs."""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit


class _Local(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: Any, latency: float, bandwidth: float) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.latency, self.bandwidth = latency, bandwidth
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client gone, or the upstream stopped: nothing for the caller to see


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as object stores do

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
        pass

    def _send(self, pieces: Iterable[bytes], bandwidth: float) -> int:
        """Write ``pieces``, at ``bandwidth`` bytes/s at most; bytes sent."""
        began, sent = time.perf_counter(), 0
        for piece in pieces:
            self.wfile.write(piece)
            sent += len(piece)
            if bandwidth:
                time.sleep(max(0.0, began + sent / bandwidth - time.perf_counter()))
        return sent


class RangeServer(_Local):
    def __init__(
        self, folder: Path, latency: float = 0.0, bandwidth: float = 0.0, etag: bool = True
    ) -> None:
        super().__init__(_Files, latency, bandwidth)
        self.folder = folder
        self.etag = etag  # else a Last-Modified only, as Python's http.server sends
        self.gets: Counter[str] = Counter()
        self.bytes_sent = 0


def _chunks(f: BinaryIO, left: int) -> Iterator[bytes]:
    while left > 0:
        piece = f.read(min(left, 1 << 20))
        if not piece:
            return
        left -= len(piece)
        yield piece


class _Files(_Quiet):
    server: RangeServer

    def _file(self) -> tuple[Path, os.stat_result] | None:
        if self.server.latency:
            time.sleep(self.server.latency)
        path = (self.server.folder / self.path.lstrip("/").split("?")[0]).resolve()
        if self.server.folder.resolve() not in path.parents or not path.is_file():
            self.send_error(404)
            return None
        return path, path.stat()

    def _headers(self, st: os.stat_result, length: int) -> None:
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if self.server.etag:
            self.send_header("ETag", f'"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"')
        else:
            self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        found = self._file()
        if found is not None:
            self.send_response(200)
            self._headers(found[1], found[1].st_size)
            self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        found = self._file()
        if found is None:
            return
        path, st = found
        with self.server.lock:
            self.server.gets[self.path] += 1
        start, end = 0, st.st_size - 1
        ranged = self.headers.get("Range", "")
        if ranged.startswith("bytes="):
            a, _, b = ranged[6:].partition("-")
            start, end = int(a), min(int(b) if b else st.st_size - 1, st.st_size - 1)
        self.send_response(206 if ranged else 200)
        self._headers(st, end - start + 1)
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end}/{st.st_size}")
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            sent = self._send(_chunks(f, end - start + 1), self.server.bandwidth)
        with self.server.lock:
            self.server.bytes_sent += sent


class LatencyProxy(_Local):
    def __init__(self, target: str, latency: float, bandwidth: float) -> None:
        super().__init__(_Forward, latency, bandwidth)
        parts = urlsplit(target)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.requests: Counter[str] = Counter()  # by method


_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
        "upgrade", "content-length"}  # fmt: skip


class _Forward(_Quiet):
    server: LatencyProxy

    def _forward(self) -> None:
        time.sleep(self.server.latency)
        with self.server.lock:
            self.server.requests[self.command] += 1
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection(self.server.host, self.server.port, timeout=600)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            upstream.request(self.command, self.path, body=body, headers=headers)
            reply = upstream.getresponse()
            data = reply.read()
            self.send_response(reply.status, reply.reason)
            for key, value in reply.getheaders():
                if key.lower() not in _HOP:
                    self.send_header(key, value)
            # (a HEAD's length is the object's, as the server said: no body follows)
            size = reply.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", size or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                pieces = (data[at : at + (1 << 20)] for at in range(0, len(data), 1 << 20))
                self._send(pieces, self.server.bandwidth)
        finally:
            upstream.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward  # noqa: N815


@contextlib.contextmanager
def _running(server: _Local) -> Iterator[Any]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def serving(folder: Path, latency: float = 0.0, bandwidth: float = 0.0, etag: bool = True) -> Any:
    """A :class:`RangeServer` of ``folder``, running (a context manager)."""
    return _running(RangeServer(folder, latency, bandwidth, etag))


def proxying(target: str, latency: float, bandwidth: float) -> Any:
    """A :class:`LatencyProxy` to the server at ``target``, running."""
    return _running(LatencyProxy(target, latency, bandwidth))
