"""The one place that opens files: paths stay paths (no fsspec import), URLs
keep their text, and file:// goes through the remote code path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from im2rec.errors import ConfigError
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, RecordReader, pack
from im2rec.storage import is_url, sibling


def test_urls_and_siblings() -> None:
    assert is_url("s3://b/x.rec") and is_url("https://h/x.rec") and is_url("file:///x")
    assert not is_url("x.rec") and not is_url("/abs/x.rec") and not is_url("C:/x.rec")
    assert sibling("s3://b/dir.v2/x.rec", ".idx") == "s3://b/dir.v2/x.idx"
    assert sibling("data/x.rec", ".idx") == str(Path("data/x.idx"))


def _rec(tmp_path: Path) -> Path:
    with IndexedRecordWriter(tmp_path / "a.rec") as w:
        for i in range(30):
            w.write_key(i, pack((0, float(i), i, 0), bytes([i]) * (1000 + 37 * i)))
    return tmp_path / "a.rec"


@pytest.mark.slow
def test_local_paths_never_import_fsspec(tmp_path: Path) -> None:
    rec = _rec(tmp_path)
    code = (
        "import sys\nfrom im2rec.recordio import IndexedRecordReader\n"
        f"r = IndexedRecordReader({str(rec)!r}); r.read_key(3)\n"
        "from im2rec.inspect.verifying import verify; verify(r.name)\n"
        "print('fsspec' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_file_urls_read_through_the_remote_view(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    from im2rec.storage.remote import RemoteView

    rec = _rec(tmp_path)
    url = rec.as_uri()
    reader = IndexedRecordReader(url)
    assert isinstance(reader.mapping()[0], RemoteView)
    assert [reader.read_key(k) for k in range(30)] == [
        IndexedRecordReader(rec).read_key(k) for k in range(30)
    ]
    assert list(RecordReader(url)) == list(RecordReader(rec))
    with pytest.raises(ConfigError, match="storage_options apply to URLs"):
        RecordReader(rec, storage_options={"anon": True})


def _read_rest(reader: RecordReader, queue: object) -> None:
    queue.put(sum(len(r) for r in reader))  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_forked_child_reads_while_the_parent_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's read-ahead threads and their pending requests do not
    exist in a forked child (a DataLoader worker): it must fetch its own."""
    pytest.importorskip("fsspec")
    import multiprocessing

    from im2rec.storage.remote import RemoteView

    monkeypatch.setattr(RemoteView, "CHUNK", 4096)  # many chunks, some pending at the fork
    rec = _rec(tmp_path)
    reader = RecordReader(rec.as_uri())
    records = iter(reader)
    for _ in range(5):  # a scan under way: chunks fetched ahead in threads
        next(records)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_read_rest, args=(reader, queue))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == sum(len(r) for r in RecordReader(rec))
