"""Reading from object storage and HTTP: a real S3-compatible server on
localhost (moto's server mode, reached through ``AWS_ENDPOINT_URL``) and a
local HTTP server that honours range requests."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec import recordio
from im2rec.errors import MissingFileError
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, RecordReader, pack
from im2rec.storage import remote
from im2rec.training.dataset import RecordDataset
from im2rec.training.iterator import ImageRecordIter

from ..s3server import BUCKET

pytest.importorskip("s3fs")


def make_rec(path: Path, n: int, size: tuple[int, int] = (60, 40)) -> Path:
    rng = np.random.default_rng(0)
    with IndexedRecordWriter(path) as w:
        for i in range(n):
            arr = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            out = io.BytesIO()
            Image.fromarray(arr).save(out, "JPEG", quality=90)
            w.write_key(i, pack((0, float(i % 7), i, 0), out.getvalue()))
    return path


@pytest.fixture(scope="module")
def local_rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_rec(tmp_path_factory.mktemp("remote") / "set.rec", 120)


@pytest.fixture(scope="module")
def s3_rec(s3: Any, local_rec: Path) -> str:
    for suffix in (".rec", ".idx"):
        s3.upload_file(str(local_rec.with_suffix(suffix)), BUCKET, f"sets/set{suffix}")
    return f"s3://{BUCKET}/sets/set.rec"


# --- the readers -------------------------------------------------------------------


@pytest.mark.slow
def test_mx_recordio_reads_the_same_records(s3_rec: str, local_rec: Path) -> None:
    local = list(RecordReader(local_rec))
    seq = recordio.MXRecordIO(s3_rec, "r")
    got = []
    while (record := seq.read()) is not None:
        got.append(record)
    assert got == local
    indexed = recordio.MXIndexedRecordIO(s3_rec[:-4] + ".idx", s3_rec, "r")
    assert indexed.keys == list(range(120))
    assert indexed.read_idx(77) == local[77]


@pytest.mark.slow
def test_random_access_fetches_little_and_a_scan_streams(s3: Any, tmp_path: Path) -> None:
    big = make_rec(tmp_path / "big.rec", 400, (200, 150))  # ~20 kB a record, ~8 MB
    for suffix in (".rec", ".idx"):
        s3.upload_file(str(big.with_suffix(suffix)), BUCKET, f"big/big{suffix}")
    reader = IndexedRecordReader(f"s3://{BUCKET}/big/big.rec")
    wanted = [3, 150, 299, 57, 380]
    total = sum(len(reader.read_key(k)) for k in wanted)
    view = reader.mapping()[0]
    assert isinstance(view, remote.RemoteView)
    # each record, plus at most one read-ahead block and frame headers
    assert view.bytes_fetched < total + len(wanted) * (remote.RemoteView.BLOCK + 64)
    # one record right after another, among random reads, is not a scan: it
    # fetched 8 MiB chunks (and four ahead) once, which later jumps into them
    # fetched more of (13x the records' bytes over 1,000 reads of a 1 GB file)
    pairs = IndexedRecordReader(f"s3://{BUCKET}/big/big.rec")
    total = sum(len(pairs.read_key(k)) for k in [100, 101, 300, 20, 102, 250, 251, 60])
    view = pairs.mapping()[0]
    assert isinstance(view, remote.RemoteView)
    assert view.bytes_fetched < total + 8 * (remote.RemoteView.BLOCK + 64)
    scan = RecordReader(f"s3://{BUCKET}/big/big.rec")
    assert sum(1 for _ in scan) == 400
    scan_view = scan.mapping()[0]
    assert isinstance(scan_view, remote.RemoteView)
    # a few requests to start, then one per 4 MiB chunk: not one per record
    assert scan_view.requests <= big.stat().st_size // remote.RemoteView.CHUNK + 6


def _sums(batch: list[tuple[np.ndarray, float]]) -> list[tuple[float, int]]:
    """Each sample's label and pixel sum, as a worker read them."""
    return [(label, int(image.sum())) for image, label in batch]


@pytest.mark.slow
def test_record_dataset_in_a_dataloader_with_workers(s3_rec: str, local_rec: Path) -> None:
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    remote_ds = RecordDataset(s3_rec, output="numpy")
    loader = DataLoader(remote_ds, batch_size=16, num_workers=2, collate_fn=_sums)
    got = [item for batch in loader for item in batch]
    local_ds = RecordDataset(local_rec, output="numpy")
    want = [(local_ds[i][1], int(local_ds[i][0].sum())) for i in range(len(local_ds))]
    assert got == want
    assert np.array_equal(remote_ds[9][0], local_ds[9][0])


@pytest.mark.slow
def test_image_record_iter_with_worker_processes(s3_rec: str, local_rec: Path) -> None:
    kw: dict[str, Any] = dict(data_shape=(3, 32, 32), batch_size=16, preprocess_threads=2,
                              rand_crop=True, shuffle=True, seed=3, verbose=False)  # fmt: skip
    with ImageRecordIter(path_imgrec=s3_rec, path_imgidx=s3_rec[:-4] + ".idx", **kw) as it:
        theirs = [b.data[0].copy() for b in it]
    with ImageRecordIter(path_imgrec=str(local_rec), path_imgidx=str(local_rec.with_suffix(".idx")),
                         **kw) as it:  # fmt: skip
        ours = [b.data[0].copy() for b in it]
    assert len(theirs) == len(ours) == 8
    for a, b in zip(theirs, ours, strict=True):
        np.testing.assert_array_equal(a, b)


# --- the commands --------------------------------------------------------------------


def rec(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)  # fmt: skip


@pytest.mark.slow
def test_inspection_commands_read_urls(
    s3: Any, s3_rec: str, local_rec: Path, tmp_path: Path
) -> None:
    done = rec("verify", s3_rec, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == 120
    info = json.loads(rec("info", s3_rec, "--json").stdout)
    assert info["records"] == 120 and info["index"]["agrees"] is True
    assert info["index"]["path"] == s3_rec[:-4] + ".idx"
    assert rec("show", s3_rec, "-o", str(tmp_path / "sheet.png"), "-n", "9").returncode == 0
    with Image.open(tmp_path / "sheet.png") as sheet:
        assert sheet.size[0] > 0
    done = rec("index", s3_rec, "-o", str(tmp_path / "set.idx"))
    assert (
        done.returncode == 0
        and (tmp_path / "set.idx").read_bytes() == local_rec.with_suffix(".idx").read_bytes()
    )
    s3.copy_object(Bucket=BUCKET, Key="copy/set.rec", CopySource=f"{BUCKET}/sets/set.rec")
    assert rec("index", f"s3://{BUCKET}/copy/set.rec").returncode == 0  # beside it, in the store
    got = s3.get_object(Bucket=BUCKET, Key="copy/set.idx")["Body"].read()
    assert got == local_rec.with_suffix(".idx").read_bytes()
    done = rec("unpack", s3_rec, str(tmp_path / "images"))
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "images").rglob("*.jpg"))) == 120


@pytest.mark.slow
def test_missing_objects_and_buckets_are_one_clear_line(s3: Any, tmp_path: Path) -> None:
    for url in (f"s3://{BUCKET}/nope/x.rec", "s3://no-such-bucket/x.rec"):
        done = rec("verify", url)
        assert done.returncode == 1
        assert f"Error: {url}: not found" in done.stderr and "Traceback" not in done.stderr
        with pytest.raises(MissingFileError, match="not found"):
            RecordReader(url)


# --- HTTP, and failures on the way ---------------------------------------------------------


class _Files(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    drops: dict[str, int] = {}  # path -> requests still to drop
    busy: dict[str, int] = {}  # path -> requests still to answer 503 (a server error)

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> bytes | None:
        if self.path.startswith("/forbidden"):
            self.send_error(403)
            return None
        if self.busy.get(self.path, 0) > 0:
            self.busy[self.path] -= 1
            self.send_error(503)
            return None
        data = self.files.get(self.path)
        if data is None:
            self.send_error(404)
            return None
        return data

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        data = self._body()
        if data is not None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        data = self._body()
        if data is None:
            return
        start, end = 0, len(data) - 1
        ranged = self.headers.get("Range", "")
        if ranged.startswith("bytes="):
            a, _, b = ranged[6:].partition("-")
            start, end = int(a), min(int(b) if b else len(data) - 1, len(data) - 1)
        if self.drops.get(self.path, 0) > 0:  # a connection dropped mid-response
            self.drops[self.path] -= 1
            self.send_response(206)
            self.send_header("Content-Length", str(end - start + 1))
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.end_headers()
            self.wfile.write(data[start : start + 10])
            self.close_connection = True  # the server closes it: the body ends early
            return
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(data[start : end + 1])


@pytest.fixture(scope="module")
def http(local_rec: Path) -> Iterator[str]:
    _Files.files = {
        "/set.rec": local_rec.read_bytes(),
        "/set.idx": local_rec.with_suffix(".idx").read_bytes(),
        "/flaky.rec": local_rec.read_bytes(),
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_https_urls_read_with_ranges(http: str, local_rec: Path) -> None:
    reader = IndexedRecordReader(f"{http}/set.rec")
    assert reader.read_key(42) == IndexedRecordReader(local_rec).read_key(42)
    view = reader.mapping()[0]
    assert isinstance(view, remote.RemoteView) and view.bytes_fetched < local_rec.stat().st_size


@pytest.mark.slow
def test_a_dropped_connection_is_retried_and_a_refusal_is_not(
    http: str, local_rec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    _Files.drops["/flaky.rec"] = 2
    reader = RecordReader(f"{http}/flaky.rec")
    assert list(reader) == list(RecordReader(local_rec))
    assert _Files.drops["/flaky.rec"] == 0  # both drops happened, and were retried
    _Files.drops["/flaky.rec"] = 99
    view = remote.RemoteView.open(f"{http}/flaky.rec")
    with pytest.raises(remote.RemoteError, match=r"failed 5 times .*AWS_ENDPOINT_URL"):
        view.read(0, 100)
    _Files.drops["/flaky.rec"] = 0
    _Files.busy["/flaky.rec"] = 2  # a server error is retried too
    assert view.read(0, 100) == local_rec.read_bytes()[:100]
    assert _Files.busy["/flaky.rec"] == 0
    with pytest.raises(remote.RemoteError, match="access denied"):
        RecordReader(f"{http}/forbidden.rec")


# --- rec list over a bucket prefix ---------------------------------------------------


def _raised_from(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as cause:
            raise outer from cause
    except BaseException as exc:  # noqa: BLE001 - returned for the check
        return exc


def test_errors_are_classified_by_type_and_status_not_by_their_words() -> None:
    from aiohttp import ClientResponseError, RequestInfo
    from botocore.exceptions import ClientError
    from multidict import CIMultiDict, CIMultiDictProxy
    from s3fs.errors import translate_boto_error
    from yarl import URL

    url = "s3://bucket/403/404.rec"
    request = RequestInfo(URL("http://x/403/404.rec"), "GET", CIMultiDictProxy(CIMultiDict()))

    def http(status: int) -> ClientResponseError:
        return ClientResponseError(request, (), status=status, message="words")

    def boto(code: str, status: int) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "NoSuchKey 404"},
                            "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")  # fmt: skip

    denied, missing = remote.RemoteError, MissingFileError
    cases: list[tuple[BaseException, type[Exception] | None]] = [
        # fsspec's HTTP backend: a refused lookup is FileNotFoundError from a 403
        (_raised_from(FileNotFoundError(url), http(403)), denied),
        (_raised_from(FileNotFoundError(url), http(404)), missing),
        (FileNotFoundError(url), missing),
        (http(401), denied),
        (http(416), remote.RemoteError),
        (http(429), None),
        (http(503), None),
        # s3fs turns botocore's errors into OSErrors raised from them
        (translate_boto_error(boto("AccessDenied", 403)), denied),
        (translate_boto_error(boto("NoSuchBucket", 404)), missing),
        (translate_boto_error(boto("SlowDown", 503)), None),
        (boto("403", 403), denied),
        (boto("InternalError", 500), None),
        (PermissionError(url), denied),
        # what a message says decides nothing
        (OSError(f"NoSuchKey 404 AccessDenied 403: {url}"), None),
        (ConnectionResetError(f"reset while reading {url}"), None),
    ]
    for exc, expected in cases:
        got = remote._classify(url, exc)
        assert (type(got) if got is not None else None) is expected, (exc, got)


@pytest.mark.slow
def test_a_child_forked_while_the_lookup_lock_is_held_can_still_look_up() -> None:
    remote._LOCK.acquire()  # as a block cache's fetching thread may hold it at a fork
    try:
        pid = os.fork()
        if pid == 0:  # the child: its own lock, free
            got = remote._LOCK.acquire(timeout=5)
            os._exit(0 if got else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        remote._LOCK.release()
    assert os.waitstatus_to_exitcode(status) == 0
