"""Writing to a store: an object appears whole under its name or not at
all (uploaded to a temporary key first), removals and lookups say when
there was nothing, reads are bounded, and the spool is a private folder.
Against a real S3-compatible server (moto's, see :mod:`tests.s3server`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from im2rec.errors import OutputError
from im2rec.storage.objects import (
    fetch,
    list_names,
    publish,
    read_manifest,
    remove,
    size_of,
    spool_for,
    url_join,
)

from ..s3server import BUCKET

# (a server: `make test-fast` leaves these out)
pytestmark = pytest.mark.slow
pytest.importorskip("s3fs")


def keys(s3: Any, prefix: str) -> list[str]:
    found = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return sorted(o["Key"] for o in found)


def test_url_join_keeps_one_slash() -> None:
    assert url_join("s3://b/p/", "a.rec") == url_join("s3://b/p", "a.rec") == "s3://b/p/a.rec"


def test_published_objects_appear_whole_and_leave_no_temporary_key(s3: Any, tmp_path: Path) -> None:
    (tmp_path / "a.rec").write_bytes(b"r" * 70_000)
    (tmp_path / "a.json").write_text("{}")
    prefix = f"s3://{BUCKET}/published"
    publish([(tmp_path / "a.rec", f"{prefix}/a.rec"), (tmp_path / "a.json", f"{prefix}/a.json")])
    assert keys(s3, "published/") == ["published/a.json", "published/a.rec"]
    assert s3.get_object(Bucket=BUCKET, Key="published/a.rec")["Body"].read() == b"r" * 70_000
    assert list_names(prefix) == ["a.json", "a.rec"]
    assert size_of(f"{prefix}/a.rec") == 70_000


def test_a_failed_upload_leaves_nothing_under_any_name(s3: Any, tmp_path: Path) -> None:
    with pytest.raises(OSError):  # (the local file is missing: the upload fails at once)
        publish([(tmp_path / "missing.rec", f"s3://{BUCKET}/failed/a.rec")])
    assert keys(s3, "failed/") == []


def test_lookups_and_removals_of_nothing_say_so(s3: Any, tmp_path: Path) -> None:
    url = f"s3://{BUCKET}/gone/a.rec"
    assert size_of(url) is None and read_manifest(url) is None
    assert list_names(f"s3://{BUCKET}/gone") == []
    s3.put_object(Bucket=BUCKET, Key="gone/a.rec", Body=b"x")
    remove(url)
    assert size_of(url) is None
    remove(url)  # (nothing there: nothing to do)
    assert size_of(str(tmp_path / "none")) is None and list_names(str(tmp_path / "none")) == []


def test_fetch_reads_no_more_than_its_limit_and_a_bad_manifest_reads_empty(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key="read/big", Body=b"0123456789" * 1000)
    assert fetch(f"s3://{BUCKET}/read/big", 25) == b"0123456789012345678901234"
    s3.put_object(Bucket=BUCKET, Key="read/m.json", Body=b"{not json")
    assert read_manifest(f"s3://{BUCKET}/read/m.json") == {}


def test_the_spool_is_a_private_folder_named_by_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IM2REC_SPOOL", str(tmp_path / "spool"))
    first, second = spool_for("s3://b/x/train.rec"), spool_for("s3://c/x/train.rec")
    assert first != second and first.name.startswith("train.rec-")
    assert (first.stat().st_mode & 0o777) == 0o700
    planted = spool_for("s3://d/y.rec")
    planted.chmod(0o777)
    with pytest.raises(OutputError, match="may be written by others"):
        spool_for("s3://d/y.rec")
