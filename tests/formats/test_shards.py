"""Naming shards: brace notation as webdataset expands it, and the shards
webdataset's ShardWriter writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.errors import ConfigError
from im2rec.formats.shards import _braces, expand_shards
from im2rec.formats.webdataset import import_webdataset
from im2rec.recordio import IndexedRecordReader, unpack

from .conftest import image


def test_shards_from_webdatasets_shardwriter(tmp_path: Path) -> None:
    wds = pytest.importorskip("webdataset")
    pattern = str(tmp_path / "theirs-%03d.tar")
    with wds.ShardWriter(pattern, maxcount=4, verbose=0) as sink:
        for i in range(10):
            sample = {"__key__": f"dir/s{i:04d}", "jpg": image("JPEG", i), "cls": i % 4,
                      "json": {"class_id": float(i % 5), "caption": "x"}}  # fmt: skip
            if i == 3:
                del sample["cls"]  # no label
            if i == 7:
                del sample["jpg"]  # no image
            sink.write(sample)
    shards = expand_shards([str(tmp_path / "theirs-{000..002}.tar")])
    assert len(shards) == 3
    result = import_webdataset(shards, tmp_path / "from-cls")
    assert result.records == 8 and result.skipped == {"no label": 1, "no image": 1}
    assert result.report is not None
    report = result.report.read_text()
    assert "dir/s0003\tno label" in report and "dir/s0007\tno image" in report
    reader = IndexedRecordReader(tmp_path / "from-cls.rec")
    kept = [i for i in range(10) if i not in (3, 7)]
    for key, i in zip(reader.keys, kept, strict=True):
        header, payload = unpack(reader.read_key(key))
        assert header.id == key and header.label == i % 4 and payload == image("JPEG", i)
    by_json = import_webdataset(shards, tmp_path / "from-json", label_key="class_id")
    assert by_json.records == 9  # sample 3 has its .json label
    labels = [unpack(r)[0].label for r in IndexedRecordReader(tmp_path / "from-json.rec")]
    assert labels == [float(i % 5) for i in range(10) if i != 7]


def test_brace_notation() -> None:
    assert _braces("a-{08..11}.tar") == ["a-08.tar", "a-09.tar", "a-10.tar", "a-11.tar"]
    assert _braces("{x,y}-{1..2}") == ["x-1", "x-2", "y-1", "y-2"]
    assert _braces("plain{}.tar") == ["plain{}.tar"]
    with pytest.raises(ConfigError, match="over 1,000,000 shards"):
        _braces("s-{0..99999999}.tar")
