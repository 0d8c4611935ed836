"""rec export --to parquet and rec import parquet given what an attacker or
an unlucky user leaves: links planted in the dataset folder, foreign and
damaged shards, FIFOs, class maps and row groups that would take gigabytes
(docs/security.md, "Outputs", "Archives" and "Sizes")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from im2rec.errors import DatasetError, OutputError
from im2rec.formats.hubfolders import split_files
from im2rec.formats.parquet import export_parquet
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, pack, unpack

from .conftest import image

pq = pytest.importorskip("pyarrow.parquet")
pa = pytest.importorskip("pyarrow")


def rec_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def small_rec(path: Path, labels: list[float] | None = None) -> Path:
    with IndexedRecordWriter(path) as w:
        for i, label in enumerate(labels or [0.0, 1.0, 2.0, 1.0]):
            w.write_key(i, pack((0, label, i, 0), image("JPEG", i)))
    return path


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# -- links planted in the dataset folder ------------------------------------


def test_a_data_folder_that_is_a_link_is_refused_and_nothing_written_there(
    tmp_path: Path,
) -> None:
    rec = small_rec(tmp_path / "d.rec")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "train-00000-of-00001.parquet"
    victim.write_bytes(b"someone's file")
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "data").symlink_to(elsewhere)
    for overwrite in (False, True):
        with pytest.raises(OutputError, match=r"hub/data: a symlink or a file is where"):
            export_parquet(rec, tmp_path / "hub", overwrite=overwrite)
        assert tree(elsewhere) == {"train-00000-of-00001.parquet": b"someone's file"}
    assert not (tmp_path / "hub" / "README.md").exists()
    done = rec_cli("export", "d.rec", "--to", "parquet", "-o", "hub", "--overwrite", cwd=tmp_path)
    assert done.returncode == 1 and "does not write through links" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_shard_name_that_is_a_link_is_neither_followed_nor_removed(tmp_path: Path) -> None:
    rec = small_rec(tmp_path / "d.rec")
    export_parquet(rec, tmp_path / "hub")
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    for name in ("train-00000-of-00001.parquet", "val-00000-of-00001.parquet"):
        link = tmp_path / "hub" / "data" / name
        link.unlink(missing_ok=True)
        link.symlink_to(victim)
        with pytest.raises(OutputError, match=f"data/{name}: a symlink where a shard belongs"):
            export_parquet(rec, tmp_path / "hub", overwrite=True)
        assert victim.read_bytes() == b"keep me" and link.is_symlink()
        link.unlink()
        export_parquet(rec, tmp_path / "hub", overwrite=True)


# -- shards already there: checked before anything is published ------------


@pytest.mark.parametrize(
    "foreign",
    [b"PAR1 not really", b"", "a Parquet file with no dataset features"],
)
def test_a_foreign_or_damaged_shard_is_found_before_the_split_is_published(
    tmp_path: Path, foreign: bytes | str
) -> None:
    rec = small_rec(tmp_path / "d.rec")
    hub = tmp_path / "hub"
    (hub / "data").mkdir(parents=True)
    bad = hub / "data" / "val-00000-of-00001.parquet"
    if isinstance(foreign, str):
        pq.write_table(pa.table({"x": [1, 2]}), bad)
    else:
        bad.write_bytes(foreign)
    before = tree(hub)
    with pytest.raises(DatasetError, match="val-00000-of-00001.parquet: not a shard of a dataset"):
        export_parquet(rec, hub)
    assert tree(hub) == before  # no train shard, no temporary file, no card
    bad.unlink()
    export_parquet(rec, hub)  # (not "split 'train' already exists")
    assert [p.name for p in split_files(hub / "data", "train")] == ["train-00000-of-00001.parquet"]
    assert "name: train" in (hub / "README.md").read_text()


def test_splits_of_other_features_are_refused_before_publishing(tmp_path: Path) -> None:
    export_parquet(small_rec(tmp_path / "a.rec"), tmp_path / "hub", split="train")
    before = tree(tmp_path / "hub")
    fractional = small_rec(tmp_path / "b.rec", [0.5, 1.5])
    with pytest.raises(DatasetError, match="split 'train' has other features than this one"):
        export_parquet(fractional, tmp_path / "hub", split="validation")
    assert tree(tmp_path / "hub") == before


# -- what a file says, bounded ------------------------------------------------


def test_a_class_map_naming_a_billionth_class_is_refused(tmp_path: Path) -> None:
    rec = small_rec(tmp_path / "d.rec")
    (tmp_path / "d.classes.tsv").write_text("0\tcat\n1000000000\tdog\n")
    with pytest.raises(DatasetError, match="label 1,000,000,000 in a map of 2 classes"):
        export_parquet(rec, tmp_path / "hub")
    (tmp_path / "d.classes.tsv").write_text("0\tcat\n1\tdog\n2\tbird\n")
    huge = small_rec(tmp_path / "e.rec", [0.0, 2.0**30])
    with pytest.raises(DatasetError, match="a record's label is 1,073,741,824, and the class map"):
        export_parquet(huge, tmp_path / "hub", class_map=str(tmp_path / "d.classes.tsv"))
    assert not os.listdir(tmp_path / "hub" / "data")


def parquet_of(path: Path, count: int, size: int, **options: object) -> Path:
    """A Parquet file of ``count`` images of ``size`` random bytes in one
    row group (the label a whole number)."""
    import numpy as np

    rng = np.random.default_rng(0)
    images = [b"\xff\xd8" + rng.bytes(size - 2) for _ in range(count)]
    column = pa.StructArray.from_arrays(
        [pa.array(images, pa.binary()), pa.array(["x.jpg"] * count)], names=["bytes", "path"]
    )
    table = pa.table({"image": column, "label": pa.array([i % 10 for i in range(count)])})
    pq.write_table(table, path, row_group_size=count, **options)  # type: ignore[arg-type]
    return path


def peak_growth(code: str) -> float:
    """How far a fresh interpreter's peak RSS grows (MB) running ``code``
    after its imports (VmHWM: ru_maxrss outlives exec, so a child of this
    large process starts with its peak)."""
    script = (
        "import pyarrow.parquet\n"
        "from im2rec.formats.parquet_import import import_parquet\n"
        "def hwm():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM'):\n"
        "            return int(line.split()[1])\n"
        "base = hwm()\n"
        f"{code}\n"
        "print((hwm() - base) / 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=True)  # fmt: skip
    return float(done.stdout.split()[-1])


def test_a_rec_column_of_another_kind_is_only_a_column_and_a_bad_header_is_named(
    tmp_path: Path,
) -> None:
    """A foreign column named ``rec`` (not rec export's header struct) made
    the import end in an AttributeError traceback; it is now left alone. A
    header struct with a missing, negative or fractional field names its row."""
    images = pa.array([b"\xff\xd8" + bytes([i]) * 20 for i in range(4)])
    labels = pa.array([3, 1, 4, 1])
    for i, other in enumerate((pa.array([5, 6, 7, 8]), pa.array([{"x": 1}] * 4),
                               pa.array(["a", "b", "c", "d"]))):  # fmt: skip
        pq.write_table(pa.table({"image": images, "label": labels, "rec": other}),
                       tmp_path / f"o{i}.parquet")  # fmt: skip
        done = rec_cli("import", "parquet", f"o{i}.parquet", "-o", f"o{i}", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        reader = IndexedRecordReader(tmp_path / f"o{i}.rec")
        got = [unpack(reader.read_key(k))[0] for k in reader.keys]
        reader.close()
        assert [(h.label, h.id) for h in got] == [(3.0, 0), (1.0, 1), (4.0, 2), (1.0, 3)]
    good: dict[str, Any] = {"flag": 0, "id": 7, "id2": 0, "key": 70}
    cases: list[tuple[int, dict[str, Any] | None]] = [
        (2, None), (1, {**good, "id": -1}), (3, {**good, "flag": None}),
        (2, {"flag": 0.5, "id": 7, "id2": 0, "key": 70}),
    ]  # fmt: skip
    for row, bad in cases:
        rows: list[dict[str, Any] | None] = [good, good, good, good]
        rows[row] = bad
        if bad is not None and isinstance(bad["flag"], float):
            rows = [{**r, "flag": float(r["flag"])} for r in rows if r]  # (a float column)
        column = pa.array(rows)
        pq.write_table(pa.table({"image": images, "label": labels, "rec": column}),
                       tmp_path / "h.parquet")  # fmt: skip
        done = rec_cli("import", "parquet", "h.parquet", "-o", "h", "--overwrite", cwd=tmp_path)
        at = 0 if bad is not None and isinstance(bad["flag"], float) else row
        assert done.returncode == 1, done.stderr
        assert f"h.parquet: row {at}: its rec column is not rec export's" in done.stderr
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "h.rec").exists()


def test_a_detection_header_kept_damaged_is_named_not_a_traceback(tmp_path: Path) -> None:
    """rec.label_head (a detection label's own header, kept by --keep-header)
    of strings, of plain numbers or of nested lists, and one value long,
    each ended the import in a traceback (ValueError, TypeError,
    IndexError); each is now one line naming the file and rows."""
    from im2rec.recordio.detection import make_label

    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for key in range(4):
            label = make_label([[1, 0.1, 0.2, 0.5, 0.6, 0]], (30, 20))
            w.write_key(key, pack((len(label), label, key, 0), image("jpeg", key)))
    export_parquet(tmp_path / "d.rec", tmp_path / "hub", keep_header=True)
    table = pq.read_table(next((tmp_path / "hub" / "data").iterdir()))
    rec = table.column("rec").combine_chunks()
    names = [rec.type.field(i).name for i in range(rec.type.num_fields)]
    cases = [
        (pa.array([["a"]] * 4), "rows 0 to 3: their rec.label_head is list<element: string>"),
        (pa.array([1, 2, 3, 4]), "rows 0 to 3: their rec.label_head is int64"),
        (pa.array([[[1.0]]] * 4), "rows 0 to 3: their rec.label_head is list<element: list"),
        (pa.array([[1.0]] * 4, pa.list_(pa.float32())), "row 0: header width A = 1"),
    ]  # fmt: skip
    for head, said in cases:
        fields = [
            head if n == "label_head" else a for n, a in zip(names, rec.flatten(), strict=True)
        ]
        column = pa.StructArray.from_arrays(fields, names=names)
        bad = table.set_column(table.schema.get_field_index("rec"), "rec", column)
        pq.write_table(bad.replace_schema_metadata(None), tmp_path / "bad.parquet")
        done = rec_cli("import", "parquet", "bad.parquet", "-o", "b", "--overwrite", cwd=tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"bad.parquet: {said}" in done.stderr
        assert not (tmp_path / "b.rec").exists()


@pytest.mark.slow
def test_a_large_row_group_is_read_a_batch_at_a_time(tmp_path: Path) -> None:
    """Whole row groups were read, two readers two ahead each: a 64 MB row
    group took 200 MB. Now a few batches and the pages being decoded."""
    source = parquet_of(tmp_path / "big.parquet", 1000, 64 << 10, compression="none",
                        use_dictionary=False, write_batch_size=16)  # fmt: skip
    grown = peak_growth(f"import_parquet([{str(source)!r}], {str(tmp_path / 'out')!r})")
    assert grown < 100, f"{grown:.0f} MB for a 64 MB row group"
    assert (tmp_path / "out.rec").stat().st_size > 64_000_000


def test_a_file_whose_rows_inflate_past_64x_is_a_compression_bomb(tmp_path: Path) -> None:
    """66 KB of Parquet whose one row group is 8,000 copies of a 64 KiB image
    (a dictionary page): 1.1 GB to import, and a 500 MB rec."""
    bomb = parquet_of(tmp_path / "bomb.parquet", 1, 64 << 10)
    one = pq.read_table(bomb)
    pq.write_table(pa.concat_tables([one] * 8000), bomb, row_group_size=8000, compression="zstd")
    assert bomb.stat().st_size < 100_000  # (one copy of the image, in its dictionary)
    done = rec_cli("import", "parquet", "bomb.parquet", "-o", "b", cwd=tmp_path)
    assert done.returncode == 1 and "refusing it as a compression bomb" in done.stderr
    assert "bomb.parquet: its rows decode past" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.parquet"]


# -- waits with no end --------------------------------------------------------


def test_a_fifo_is_refused_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    """open() of a FIFO waited for a writer for ever, SIGTERM did not end
    it, and a kill left the temporary .rec behind."""
    good = parquet_of(tmp_path / "good.parquet", 3, 100)
    os.mkfifo(tmp_path / "fifo.parquet")
    for args in (["fifo.parquet"], ["good.parquet", "fifo.parquet"]):
        done = rec_cli("import", "parquet", *args, "-o", "x", cwd=tmp_path, timeout=20)
        assert done.returncode == 1, done.stderr
        assert "fifo.parquet: not a regular file (a FIFO, device or socket)" in done.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.parquet", good.name]


def detection_table(path: Path, rows: int, group: int) -> Path:
    """A cppe-5-style table of ``rows`` rows in row groups of ``group``:
    each image a JPEG header 40 x 30 pixels big, two boxes."""
    import numpy as np

    frame = b"\xff\xd8\xff\xc0\x00\x11\x08\x00\x1e\x00\x28\x03" + bytes(9)
    images = pa.array([frame] * rows, pa.binary())
    offsets = pa.array(np.arange(0, 2 * rows + 1, 2, dtype=np.int32))
    boxes = pa.FixedSizeListArray.from_arrays(
        pa.array(np.tile(np.array([1, 2, 10, 5, 20, 10, 10, 10], np.float32), rows)), 4
    )
    objects = pa.StructArray.from_arrays(
        [pa.ListArray.from_arrays(offsets, pa.array(np.tile([0, 1], rows))),
         pa.ListArray.from_arrays(offsets, boxes)], names=["category", "bbox"],
    )  # fmt: skip
    table = pa.table({"image": images, "objects": objects})
    pq.write_table(table, path, row_group_size=group, compression="none", use_dictionary=False)
    return path


@pytest.mark.slow
def test_a_million_row_detection_table_imports_in_bounded_memory(tmp_path: Path) -> None:
    """Rows are decoded and written a batch at a time, even from one row
    group of a million rows: the peak does not follow the table's rows."""
    import numpy as np

    source = detection_table(tmp_path / "det.parquet", 1_000_000, 1_000_000)
    grown = peak_growth(f"import_parquet([{str(source)!r}], {str(tmp_path / 'out')!r})")
    assert grown < 100, f"{grown:.0f} MB to import a million rows"
    from im2rec.recordio import IndexedRecordReader, unpack

    reader = IndexedRecordReader(tmp_path / "out.rec")
    assert len(reader) == 1_000_000
    header, _ = unpack(reader.read_key(999_999))
    want = [4, 5, 40, 30, 0, 1 / 40, 2 / 30, 11 / 40, 7 / 30, 1, 20 / 40, 10 / 30, 30 / 40, 20 / 30]
    assert header.label.tobytes() == np.array(want, np.float32).tobytes()


def test_small_row_groups_are_read_in_bounded_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row groups are read a run of neighbours at a time (the Hub's 100-row
    groups of small images cost a call each), each run within RUN_BYTES
    (or one group larger than that) and RUN_GROUPS, every group once, in
    order; the import gives the same records as one group a call."""
    from im2rec.formats import parquet_reading
    from im2rec.formats.parquet_import import import_parquet

    source_path = parquet_of(tmp_path / "s.parquet", 300, 500)
    table = pq.read_table(source_path)
    pq.write_table(table, source_path, row_group_size=3, compression="none")
    monkeypatch.setattr(parquet_reading, "RUN_BYTES", 8_000)
    source = parquet_reading.Source(pq, str(source_path))
    try:
        meta = source.parquet.metadata
        runs = list(source.runs(meta.num_row_groups))
        stored = [sum(meta.row_group(g).column(j).total_compressed_size
                      for j in range(meta.row_group(g).num_columns))
                  for g in range(meta.num_row_groups)]  # fmt: skip
        assert [g for run in runs for g in run] == list(range(meta.num_row_groups))
        assert len(runs) > 1 and max(len(run) for run in runs) > 1
        for run in runs:
            assert len(run) <= parquet_reading.RUN_GROUPS
            assert len(run) == 1 or sum(stored[g] for g in run) <= 8_000
    finally:
        source.close()
    import_parquet([str(source_path)], tmp_path / "runs")
    monkeypatch.setattr(parquet_reading, "RUN_GROUPS", 1)
    import_parquet([str(source_path)], tmp_path / "one")
    assert (tmp_path / "runs.rec").read_bytes() == (tmp_path / "one.rec").read_bytes()
    assert (tmp_path / "runs.idx").read_bytes() == (tmp_path / "one.idx").read_bytes()
