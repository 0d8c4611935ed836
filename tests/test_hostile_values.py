"""Files and options that amplify, and values that would be stored wrong
without a word (docs/security.md, "Sizes" and "Values")."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from im2rec.cli import main
from im2rec.errors import ConfigError, DatasetError
from im2rec.executors import LocalExecutor
from im2rec.listing.lstfile import read_lst
from im2rec.recordio import IndexedRecordWriter, RecordReader, pack, unpack


def jpeg(seed: int = 0) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 12), (seed * 40 % 256, 90, 30)).save(out, "JPEG")
    return out.getvalue()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


# -- files and options that amplify -------------------------------------------


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    path = tmp_path / "d.rec"
    with IndexedRecordWriter(path) as w:
        for key in range(12):
            w.write_key(key, pack((0, float(key % 3), key, 0), jpeg(key)))
    return path


@pytest.mark.parametrize(
    "pattern",
    ["x-%c.tar", "x-%.1s.tar", "x-%.0s.tar", "x-%0999999999d.tar", "x-%s.tar", "x-%d-%d.tar",
     "x-%021d.tar", "x-%.tar", "x-%x.tar"],
)  # fmt: skip
def test_export_patterns_hold_exactly_one_sane_number(rec: Path, pattern: str) -> None:
    code, output = invoke("export", str(rec), "--to", "webdataset", "-o",
                          str(rec.parent / pattern), "--maxcount", "2")  # fmt: skip
    assert code == 2 and "exactly one number pattern" in output, output
    assert not list(rec.parent.glob("x-*"))


@pytest.mark.parametrize(("pattern", "first"), [("x-%06d.tar", "x-000000.tar"),
                                                ("x%%-%d.tar", "x%-0.tar")])  # fmt: skip
def test_export_patterns_that_are_fine(rec: Path, pattern: str, first: str) -> None:
    code, output = invoke("export", str(rec), "--to", "webdataset", "-o",
                          str(rec.parent / pattern), "--maxcount", "5", "-q")  # fmt: skip
    assert code == 0, output
    shards = sorted(p.name for p in rec.parent.glob("x*.tar"))
    assert len(shards) == 3 and shards[0] == first


def test_a_billion_chunks_is_refused_not_written(tmp_path: Path) -> None:
    (tmp_path / "img" / "a").mkdir(parents=True)
    for i in range(3):
        (tmp_path / "img" / "a" / f"{i}.jpg").write_bytes(jpeg(i))
    t0 = time.perf_counter()
    code, output = invoke("list", str(tmp_path / "img"), "--recursive", "--chunks", "1000000000")
    assert code == 2 and "more than the 3 images" in output, output
    assert time.perf_counter() - t0 < 10


# -- values that would be stored wrong -------------------------------------------


def test_whole_labels_float32_cannot_hold_are_refused_in_a_list(tmp_path: Path) -> None:
    lst = tmp_path / "a.lst"
    lst.write_text("0\t16777216\ta.jpg\n1\t16777217\tb.jpg\n")
    with pytest.raises(DatasetError, match=r"a\.lst:2: the label 16777217 is a whole number"):
        read_lst(lst)
    lst.write_text("0\t16777216\ta.jpg\n1\t16777218\tb.jpg\n2\t0.1\tc.jpg\n")
    assert [i.labels for i in read_lst(lst)] == [(16777216.0,), (16777218.0,), (0.1,)]


def test_insightface_identities_never_merge(tmp_path: Path) -> None:
    for name in ("a.jpg", "b.jpg"):
        (tmp_path / name).write_bytes(jpeg())
    (tmp_path / "f.lst").write_text("0\t16777216\ta.jpg\n1\t16777217\tb.jpg\n")
    code, output = invoke("pack", str(tmp_path / "f.lst"), "--layout", "insightface",
                          "--pass-through")  # fmt: skip
    assert code == 1 and "f.lst:2: the label 16777217" in output, output
    assert not (tmp_path / "f.rec").exists()


def test_import_refuses_a_class_float32_cannot_hold(tmp_path: Path) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for key, cls in (("a", b"16777217"), ("b", b"16777218"), ("c", b"3")):
            for ext, data in (("jpg", jpeg()), ("cls", cls)):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    (tmp_path / "s.tar").write_bytes(out.getvalue())
    code, output = invoke("import", "webdataset", str(tmp_path / "s.tar"), "-o",
                          str(tmp_path / "o"), "-q")  # fmt: skip
    assert code == 0, output
    labels = [unpack(r)[0].label for r in RecordReader(tmp_path / "o.rec")]
    assert labels == [16777218.0, 3.0]
    report = (tmp_path / "o.import-skipped.tsv").read_text()
    assert "\ta\tbad label: 16777217 is a whole number float32 cannot hold" in report


def test_parquet_import_refuses_labels_float32_would_change(tmp_path: Path) -> None:
    """rec import parquet stored 16,777,217 as 16,777,216 (and 2**62 + 1, a
    double already, as 2**62) without a word, where the .lst and WebDataset
    paths refuse them; each is now refused naming its row."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from im2rec.recordio.header import stored_label

    assert stored_label(2**62 + 1) is None and stored_label(2**62) == 2.0**62
    images = pa.array([jpeg()] * 3)
    cases = [
        (pa.array([1, 16777217, 2]), "row 1: its label 16777217 is a whole number float32",
         "read back as 16777216"),
        (pa.array([[0, 1], [2, 3], [16777217, 1]]), "row 2: its label 16777217", "16777216"),
        (pa.array([[0.0, 1.0], [float("nan"), 16777217.0], [1.0, 2.0]]),
         "row 1: its label 16777217", "16777216"),
        (pa.array([1, 2, 2**62 + 1]), "row 2: its label 4611686018427387905",
         "read back as 4611686018427387904"),
        (pa.array([1.0, 1e39, 2.0]), "row 1: its label 1e+39 does not fit float32", "3.4e38"),
    ]  # fmt: skip
    for labels, said, more in cases:
        pq.write_table(pa.table({"image": images, "label": labels}), tmp_path / "l.parquet")
        code, output = invoke("import", "parquet", str(tmp_path / "l.parquet"), "-o",
                              str(tmp_path / "o"), "-q", "--overwrite")  # fmt: skip
        assert code == 1 and f"l.parquet: {said}" in output and more in output, output
        assert not (tmp_path / "o.rec").exists()
    pq.write_table(pa.table({"image": images, "label": pa.array([16777218, 2**62, 0])}),
                   tmp_path / "l.parquet")  # fmt: skip
    code, output = invoke("import", "parquet", str(tmp_path / "l.parquet"), "-o",
                          str(tmp_path / "o"), "-q")  # fmt: skip
    assert code == 0, output
    labels = [unpack(r)[0].label for r in RecordReader(tmp_path / "o.rec")]
    assert labels == [16777218.0, 2.0**62, 0.0]


def test_the_mxnet_iterator_checks_them_too(rec: Path) -> None:
    from im2rec import ImageRecordIter

    with pytest.raises(ConfigError, match="pca_noise"):
        ImageRecordIter(path_imgrec=str(rec), data_shape=(3, 8, 8), batch_size=2, pca_noise=1e300)


@pytest.mark.parametrize(
    "command",
    [["pack", "--num-workers", "100000"], ["pack", "--num-thread", "100000", "--pass-through"],
     ["imagenet", "--download-dir", ".", "--num-workers", "100000"]],
)  # fmt: skip
@pytest.mark.slow
def test_a_hundred_thousand_workers_is_refused_before_one_starts(
    rec: Path, command: list[str]
) -> None:
    """Every worker count is bounded by the machine (it had started 3,590
    of 100,000 processes and 21 GB on a 2-core machine before it was
    stopped), in a real process, whose children are counted."""

    lst = rec.with_suffix(".lst")
    lst.write_text("".join(f"{k}\t0\t{k}.jpg\n" for k in range(12)))
    args = [*command, str(lst)] if command[0] == "pack" else command
    proc = subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, timeout=60, cwd=rec.parent)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "100,000: this machine runs 1 to" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_the_other_worker_counts_are_bounded_too(rec: Path) -> None:

    from im2rec import ImageRecordIter

    with pytest.raises(ConfigError, match="preprocess_threads 100,000: this machine runs"):
        ImageRecordIter(path_imgrec=str(rec), data_shape=(3, 8, 8), batch_size=2,
                        preprocess_threads=100_000)  # fmt: skip
    with pytest.raises(ConfigError, match="preprocess_threads must be 0 or more"):
        ImageRecordIter(path_imgrec=str(rec), data_shape=(3, 8, 8), batch_size=2,
                        preprocess_threads=-3)  # fmt: skip
    with pytest.raises(ConfigError, match="prefetch_buffer must not be negative"):
        ImageRecordIter(path_imgrec=str(rec), data_shape=(3, 8, 8), batch_size=2,
                        prefetch_buffer=-5)  # fmt: skip
    with pytest.raises(ConfigError, match="--num-workers 100,000"):
        LocalExecutor(100_000)
    rec.with_suffix(".lst").write_text("0\t0\tx.jpg\n")
    proc = subprocess.run(
        [sys.executable, "-m", "im2rec.cli.im2rec_compat", str(rec.parent / "d"),
         str(rec.parent), "--num-thread", "100000"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--num-thread 100,000" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
