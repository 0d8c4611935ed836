"""rec export --to parquet and rec import parquet: the Hub's folder layout,
loaded by the real ``datasets`` with the right features on every split,
byte-identical round trips, Parquet written by ``datasets`` itself read
back, and bad sources refused with one line."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from im2rec.errors import ConfigError, DatasetError
from im2rec.formats import parquet
from im2rec.formats.hubfolders import split_files
from im2rec.formats.parquet import export_parquet
from im2rec.formats.parquet_import import import_parquet
from im2rec.recordio import IndexedRecordReader, unpack

datasets = pytest.importorskip("datasets")
pq = pytest.importorskip("pyarrow.parquet")
# datasets' progress bars: tqdm's monitor thread would outlive these tests and,
# being a foreign thread, make later tests in this process' pools refuse to fork
datasets.disable_progress_bars()
pytest.importorskip("tqdm").tqdm.monitor_interval = 0

ROOT = Path(__file__).resolve().parents[2]


def rec_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """examples/example listed with a validation split and packed."""
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    for args in (("list", "example", "--recursive", "--train-ratio", "0.8", "-o", "ex", "-q"),
                 ("pack", "ex_train", "ex_val", "--pass-through", "-q")):  # fmt: skip
        assert rec_cli(*args, cwd=tmp_path).returncode == 0
    return tmp_path


def test_datasets_loads_every_split_with_its_features(example: Path) -> None:
    for rec, split in (("ex_train.rec", "train"), ("ex_val.rec", "validation")):
        done = rec_cli("export", rec, "--to", "parquet", "-o", "hub", "--split", split,
                       "--maxsize", "30000", "--keep-header", "--json", cwd=example)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["label"] == "class"
    ds = datasets.load_dataset(str(example / "hub"))
    assert set(ds) == {"train", "validation"}
    classes = (example / "ex.classes.tsv").read_text().split()[1::2]
    for split, rec in (("train", "ex_train.rec"), ("validation", "ex_val.rec")):
        features = ds[split].features
        assert isinstance(features["image"], datasets.Image)
        assert features["label"].names == classes
        reader = IndexedRecordReader(example / rec)
        assert len(ds[split]) == len(reader)
        for row, key in zip(ds[split], reader.keys, strict=True):
            header, payload = unpack(reader.read_key(key))
            assert row["label"] == int(header.label) and row["rec"]["key"] == key
            assert np.array_equal(np.asarray(row["image"]),
                                  np.asarray(Image.open(io.BytesIO(payload))))  # fmt: skip
    shards = split_files(example / "hub" / "data", "train")
    assert len(shards) > 1 and shards[0].name.endswith(f"-of-{len(shards):05d}.parquet")
    card = (example / "hub" / "README.md").read_text()
    assert "num_examples: " in card and "path: data/validation-*" in card
    builder = datasets.load_dataset_builder(str(example / "hub"))
    assert builder.info.features["label"].names == classes  # (read from the card)


def test_the_card_carries_names_yaml_would_misread(example: Path) -> None:
    """Class and split names that YAML reads as other things (a boolean,
    null, a number, a mapping, a comment) come back from the card as
    written."""
    classes = example / "ex.classes.tsv"
    count = len(classes.read_text().splitlines())
    tricky = ["yes", "null", "1.5", "a: b", "#c", "it's", "[d]", "- e", "{f}"][:count]
    classes.write_text("".join(f"{i}\t{name}\n" for i, name in enumerate(tricky)))
    for split in ("yes", "1.5"):
        done = rec_cli("export", "ex_train.rec", "--to", "parquet", "-o", "hub", "--split", split,
                       cwd=example)  # fmt: skip
        assert done.returncode == 0, done.stderr
    builder = datasets.load_dataset_builder(str(example / "hub"))
    assert builder.info.features["label"].names == tricky  # (read from the card)
    assert set(builder.info.splits) == {"yes", "1.5"}
    assert len(datasets.load_dataset(str(example / "hub"), split="1.5")) > 0


def test_round_trip_is_byte_identical(mixed: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(parquet, "ROW_GROUP_ROWS", 4)  # several row groups a shard
    result = export_parquet(mixed, tmp_path / "hub", max_shard_bytes=8000, keep_header=True)
    assert result.label == "list" and len(result.shards) > 1
    assert pq.ParquetFile(result.shards[0]).num_row_groups >= 1
    assert sum(pq.ParquetFile(s).num_row_groups for s in result.shards) > len(result.shards)
    import_parquet(result.shards, tmp_path / "back")
    assert (tmp_path / "back.rec").read_bytes() == mixed.read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == mixed.with_suffix(".idx").read_bytes()


def test_without_proc_the_shards_are_written_through_a_python_file(
    mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (where /proc/self/fd does not exist, as on macOS)
    real = parquet.os.path.exists
    monkeypatch.setattr(
        parquet.os.path, "exists", lambda p: not str(p).startswith("/proc/") and real(p)
    )
    result = export_parquet(mixed, tmp_path / "hub", keep_header=True)
    import_parquet(result.shards, tmp_path / "back")
    assert (tmp_path / "back.rec").read_bytes() == mixed.read_bytes()


def test_a_folder_and_its_split_through_the_command(example: Path) -> None:
    assert rec_cli("export", "ex_val.rec", "--to", "parquet", "-o", "hub", "--split", "validation",
                   "--keep-header", "-q", cwd=example).returncode == 0  # fmt: skip
    again = rec_cli("export", "ex_val.rec", "--to", "parquet", "-o", "hub", "--split",
                    "validation", cwd=example)  # fmt: skip
    assert again.returncode == 1 and "already exists; pass --overwrite" in again.stderr
    assert "Traceback" not in again.stderr
    done = rec_cli("import", "parquet", "hub", "--split", "validation", "-o", "back", "--json",
                   cwd=example)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == len(IndexedRecordReader(example / "ex_val.rec"))
    assert (example / "back.rec").read_bytes() == (example / "ex_val.rec").read_bytes()
    missing = rec_cli("import", "parquet", "hub", "--split", "test", "-o", "t", cwd=example)
    assert missing.returncode == 2 and "no Parquet files of split 'test'" in missing.stderr
    assert "its splits: validation (--split)" in missing.stderr


def test_parquet_that_datasets_wrote_is_imported(tmp_path: Path) -> None:
    """A dataset saved by datasets itself (an Image and a ClassLabel column,
    no record header): ids and keys count from 0, the bytes kept."""
    images = []
    for i in range(5):
        out = io.BytesIO()
        Image.new("RGB", (8 + i, 6), (i * 40, 0, 0)).save(out, "PNG")
        images.append(out.getvalue())
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=["a", "b", "c"])})  # fmt: skip
    ds = datasets.Dataset.from_dict(
        {"image": [{"bytes": b, "path": None} for b in images], "label": [0, 2, 1, 2, 0]},
        features=features,
    )
    ds.to_parquet(str(tmp_path / "theirs.parquet"))
    result = import_parquet([str(tmp_path / "theirs.parquet")], tmp_path / "mine")
    assert result.records == 5
    reader = IndexedRecordReader(tmp_path / "mine.rec")
    assert reader.keys == list(range(5))
    for i, key in enumerate(reader.keys):
        header, payload = unpack(reader.read_key(key))
        assert payload == images[i] and header.label == [0, 2, 1, 2, 0][i] and header.id == i


def test_bad_sources_and_options_are_named(tmp_path: Path, mixed: Path) -> None:
    with pytest.raises(ConfigError, match="split 'a/b'"):
        export_parquet(mixed, tmp_path / "hub", split="a/b")
    datasets.Dataset.from_dict({"text": ["x"]}).to_parquet(str(tmp_path / "text.parquet"))
    with pytest.raises(DatasetError, match="no image column"):
        import_parquet([str(tmp_path / "text.parquet")], tmp_path / "t")
    assert not (tmp_path / "t.rec").exists()
    import pyarrow as pa

    table = pa.table({"image": [{"bytes": None, "path": "x.jpg"}], "label": [1]})
    pq.write_table(table, tmp_path / "paths.parquet")
    with pytest.raises(DatasetError, match="by path only"):
        import_parquet([str(tmp_path / "paths.parquet")], tmp_path / "p")


def test_a_damaged_parquet_file_is_one_line(tmp_path: Path, mixed: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # not Parquet at all: the command's one line, exit 1, no traceback
    (tmp_path / "noise.parquet").write_bytes(bytes(range(256)) * 20)
    done = rec_cli("import", "parquet", "noise.parquet", "-o", "n", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "noise.parquet: pyarrow cannot read it" in done.stderr and "magic bytes" in done.stderr
    # a page in the middle overwritten: the file and its row group named,
    # nothing written
    monkeypatch.setattr(parquet, "ROW_GROUP_ROWS", 2)
    (shard,) = export_parquet(mixed, tmp_path / "hub").shards
    meta = pq.ParquetFile(shard).metadata
    assert meta.num_row_groups >= 3
    column = meta.row_group(2).column(0)
    data = bytearray(Path(shard).read_bytes())
    at = column.data_page_offset
    data[at : at + 64] = b"\xff" * 64
    Path(shard).write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=r"train-00000-of-00001.parquet: row group 2: pyarrow"):
        import_parquet([shard], tmp_path / "d")
    assert not (tmp_path / "d.rec").exists() and not (tmp_path / "d.idx").exists()


@pytest.mark.parametrize(
    ("labels", "kind"),
    [
        ([1.0, 2.0, 2.5], "float"),
        ([1.0, 2.0, [3.0, 4.0]], "multi"),
        ([1.0, 2.0, [3.5, 4.0]], "list"),
        ([3.0, 1.0, 0.0], "int"),
        ([[4, 5, 30, 20, 1, 0.1, 0.1, 0.5, 0.5], [2.0, 1.0], 3.0], "list"),
        ([[4, 5, 30, 20, 1, 0.1, 0.1, 0.5, 0.5], [2.0, 1.0], [4, 5, 9, 9, 0, 0, 0, 1, 1]], "list"),
        ([[4, 5, 30, 20, 1, 0.1, 0.1, 0.5, 0.5], [4, 6, 9, 9, 0, 0, 0, 1, 1, 1]], "detection"),
    ],
    # fmt: skip
)
def test_a_later_label_widens_the_column(tmp_path: Path, labels: list, kind: str) -> None:
    """The column is guessed from the first record and the export starts
    over, every header surveyed, when a later one does not fit it."""
    from im2rec.recordio import IndexedRecordWriter, pack

    from .conftest import image

    with IndexedRecordWriter(tmp_path / "w.rec") as w:
        for i, label in enumerate(labels):
            flag = len(label) if isinstance(label, list) else 0
            w.write_key(i, pack((flag, label, i, 0), image("JPEG", i)))
    result = export_parquet(tmp_path / "w.rec", tmp_path / "hub", keep_header=True)
    assert result.label == kind and result.rows == len(labels)
    assert [p.name for p in (tmp_path / "hub" / "data").iterdir()] == [
        "train-00000-of-00001.parquet"
    ]  # (nothing left of the first try)
    import_parquet(result.shards, tmp_path / "back")
    assert (tmp_path / "back.rec").read_bytes() == (tmp_path / "w.rec").read_bytes()


def test_a_mistyped_split_names_the_ones_there(tmp_path: Path, mixed: Path) -> None:
    export_parquet(mixed, tmp_path / "hub", split="train")
    export_parquet(mixed, tmp_path / "hub", split="validation")
    done = rec_cli("import", "parquet", "hub", "--split", "valid", "-o", "x", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "split 'valid' in config 'default'; its splits: train, validation" in done.stderr
