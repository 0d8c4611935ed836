"""rec export, rec import and rec convert through the real CLI: a round
trip gives the same bytes, outputs are refused unless --overwrite, shard
names need a number pattern, and --json counts what was written."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from im2rec.cli import main
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, pack, unpack


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture
def small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Seven JPEG records of three identities, in the folder made current."""
    monkeypatch.chdir(tmp_path)
    with IndexedRecordWriter(tmp_path / "s.rec") as w:
        for key in range(7):
            out = io.BytesIO()
            Image.new("RGB", (12 + key, 10), (key * 30, 60, 90)).save(out, "JPEG")
            w.write_key(key, pack((0, float(key % 3), key, 0), out.getvalue()))
    return tmp_path / "s.rec"


def test_export_then_import_is_the_same_rec(small: Path) -> None:
    code, out = invoke("export", "s.rec", "--to", "webdataset", "-o", "wds/s-%02d.tar",
                       "--maxcount", "3", "--json")  # fmt: skip
    assert code == 0, out
    assert json.loads(out)["shards"] == ["wds/s-00.tar", "wds/s-01.tar", "wds/s-02.tar"]
    code, out = invoke("import", "webdataset", "wds/s-{00..02}.tar", "-o", "back", "--json")
    assert code == 0 and json.loads(out)["records"] == 7, out
    assert Path("back.rec").read_bytes() == small.read_bytes()
    assert Path("back.idx").read_bytes() == small.with_suffix(".idx").read_bytes()
    code, out = invoke("import", "webdataset", "wds/*.tar", "-o", "back")
    assert code == 1 and "back.rec: already exists; pass --overwrite" in out
    assert invoke("import", "webdataset", "wds/*.tar", "-o", "back", "--overwrite", "-q")[0] == 0


def test_shard_names_need_one_number_pattern(small: Path) -> None:
    code, out = invoke("export", "s.rec", "--to", "webdataset", "-o", "one.tar", "--maxcount", "3")
    assert code == 2 and "needs a number pattern" in out
    assert not list(small.parent.glob("*one.tar*"))


def test_convert_to_the_face_layout_counts_identities(small: Path) -> None:
    code, out = invoke("convert", "s.rec", "--layout", "insightface", "-o", "faces", "--json")
    assert code == 0, out
    counts = json.loads(out)
    assert counts["images"] == 7 and counts["identities"] == 3 and counts["rec"] == "faces.rec"
    reader = IndexedRecordReader(small.parent / "faces.rec")
    header, payload = unpack(reader.read_key(0))
    assert payload == b"" and header.label.tolist() == [8.0, 11.0]  # images 1..7, identities 8..10
    code, out = invoke("convert", "s.rec", "--layout", "insightface", "-o", "faces")
    assert code == 1 and "already exists" in out and "--overwrite" in out


@pytest.mark.parametrize(
    "command",
    [
        ["export", "e.rec", "--to", "parquet", "-o", "out"],
        ["export", "e.rec", "--to", "webdataset", "-o", "out/s-%02d.tar"],
        ["convert", "e.rec", "--layout", "insightface", "-o", "faces"],
    ],
)
def test_a_rec_of_no_records_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """As the imports refuse inputs of no rows or samples: no empty dataset,
    no dataset card without features, no face header of no identities."""
    if "parquet" in command:
        pytest.importorskip("pyarrow")  # (without it, export says so first)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.rec").write_bytes(b"")
    code, out = invoke(*command)
    assert code == 1, out
    assert out.strip().endswith("Error: e.rec: holds no records (0 bytes); nothing was written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.rec"]


def test_an_empty_rec_leaves_a_published_split_and_its_card_as_they_were(small: Path) -> None:
    pytest.importorskip("pyarrow")
    code, out = invoke("export", "s.rec", "--to", "parquet", "-o", "hub", "--pretty-name", "Seven")
    assert code == 0, out
    before = {p: p.read_bytes() for p in sorted(Path("hub").rglob("*")) if p.is_file()}
    Path("e.rec").write_bytes(b"")
    code, out = invoke("export", "e.rec", "--to", "parquet", "-o", "hub", "--overwrite")
    assert code == 1 and "holds no records" in out, out
    assert {p: p.read_bytes() for p in sorted(Path("hub").rglob("*")) if p.is_file()} == before
