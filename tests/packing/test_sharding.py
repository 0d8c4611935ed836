"""Sharded packing, here and on a real Dask ``LocalCluster`` (2 worker
processes): same bytes as the local executor, retries after a killed worker,
resume, the global index, and the errors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from im2rec.cli import main
from im2rec.errors import ConfigError, DatasetError, Im2RecError
from im2rec.executors import LocalExecutor
from im2rec.listing import ListOptions, make_lists
from im2rec.listing.lstfile import read_lst
from im2rec.packing import PackOptions, pack_list
from im2rec.packing.cluster import DaskRunner, LocalRunner
from im2rec.packing.sharding import ShardedResult, pack_sharded
from im2rec.packing.shards import shard_specs
from im2rec.recordio import RecordReader, load_index, unpack

from ..conftest import photo

distributed = pytest.importorskip("distributed")

RESIZE = PackOptions(resize=40, quality=90)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shards") / "images"
    for i in range(60):
        folder = root / f"class{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        photo(60 + i % 17, 48 + i % 11, i).save(folder / f"{i:03d}.jpg", quality=90)
    (root / "class0" / "broken.jpg").write_bytes(b"not a jpeg")
    return root


def listed(images: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    make_lists(images, folder / "data", ListOptions(recursive=True))
    return folder / "data.lst"


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskRunner]:
    with DaskRunner(workers=2) as runner:
        yield runner


def local(lst: Path, shards: int, **kw: Any) -> ShardedResult:
    with LocalExecutor(2) as pool:
        return pack_sharded(lst, RESIZE, shards=shards, runner=LocalRunner(pool), **kw)


def shard_files(folder: Path) -> dict[str, bytes]:
    """Every shard output, manifests without their timing."""
    files = {}
    for path in sorted(folder.glob("data-*")):
        data = path.read_bytes()
        if path.name.endswith(".pack.json"):
            manifest = json.loads(data)
            manifest.pop("seconds")
            data = json.dumps(manifest).encode()
        files[path.name] = data
    return files


def test_shards_are_contiguous_balanced_slices(images: Path, tmp_path: Path) -> None:
    lst = listed(images, tmp_path)
    items = read_lst(lst)
    specs = shard_specs(lst, items, 4, RESIZE, str(images))
    assert [s.entries for s in specs] == [15, 15, 16, 15]
    # (lines numbered within each shard's own list)
    assert [(i.key, i.labels, i.path) for s in specs for i in s.items] == [
        (i.key, i.labels, i.path) for i in items
    ]
    assert [s.stem for s in specs][-1] == "data-00003-of-00004"
    with pytest.raises(ConfigError, match="--shards must be between 1 and the 61 entries"):
        shard_specs(lst, items, 62, RESIZE, str(images))


@pytest.mark.slow
def test_local_shards_hold_the_unsharded_records_and_a_global_index(
    images: Path, tmp_path: Path
) -> None:
    whole = pack_list(listed(images, tmp_path / "whole"), RESIZE, root=images)
    lst = listed(images, tmp_path / "sharded")
    result = local(lst, 3, global_index=True)
    assert result.records == whole.records == 60 and result.failures == {"undecodable": 1}
    recs = [lst.with_name(f"data-{i:05d}-of-00003.rec") for i in range(3)]
    records = [r for rec in recs for r in RecordReader(rec)]
    assert records == list(RecordReader(whole.rec))
    reports = list((tmp_path / "sharded").glob("data-*-of-00003.failures.tsv"))
    assert len(reports) == 1 and "broken.jpg" in reports[0].read_text()
    # the global index: offsets across the shards in name order, each a record head
    index = load_index(result.global_index)
    assert len(index) == result.records
    sizes = [rec.stat().st_size for rec in recs]
    starts = [sum(sizes[:i]) for i in range(3)]
    for key, offset in zip(index.key_list(), index.offsets.tolist(), strict=True):
        shard = max(i for i in range(3) if starts[i] <= offset)
        header, _ = unpack(RecordReader(recs[shard]).read_at(offset - starts[shard]))
        assert header.id == key
    manifest = json.loads(Path(result.manifest).read_text())
    assert [s["records"] for s in manifest["shards"]] == [r.records for r in result.shards]


def packed_here_listed_there(images: Path, tmp_path: Path, shards: int) -> Path:
    """Pack the list locally in tmp_path/local; return the same list in tmp_path/dask."""
    local(listed(images, tmp_path / "local"), shards)
    return listed(images, tmp_path / "dask")


@pytest.mark.slow
def test_dask_shards_are_byte_identical_to_local(
    images: Path, tmp_path: Path, cluster: DaskRunner
) -> None:
    there = packed_here_listed_there(images, tmp_path, 4)
    result = pack_sharded(there, RESIZE, shards=4, runner=cluster)
    assert {r.worker for r in result.shards} <= set(cluster.client.scheduler_info()["workers"])
    assert shard_files(tmp_path / "dask") == shard_files(tmp_path / "local")
    assert not list((tmp_path / "dask").glob(".*staging"))


def _kill_when_a_shard_starts(folder: str) -> None:
    """Runs inside each Dask worker: SIGKILL this worker as soon as any shard
    has started (its staging folder exists)."""

    def watch() -> None:
        while not any(name.endswith(".staging") for name in os.listdir(folder)):
            time.sleep(0.002)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


@pytest.mark.slow
def test_a_killed_worker_is_retried_and_the_output_is_identical(
    images: Path, tmp_path: Path, cluster: DaskRunner
) -> None:
    there = packed_here_listed_there(images, tmp_path, 3)
    before = set(cluster.client.run(os.getpid).values())
    cluster.client.run(_kill_when_a_shard_starts, str(there.parent))
    pack_sharded(there, RESIZE, shards=3, runner=cluster)
    cluster.client.wait_for_workers(2)
    after = set(cluster.client.run(os.getpid).values())
    assert not before & after  # every worker died mid-shard and was restarted
    assert shard_files(tmp_path / "dask") == shard_files(tmp_path / "local")
    assert not list((tmp_path / "dask").glob(".*staging"))


@pytest.mark.slow
def test_resume_skips_verified_shards_only(images: Path, tmp_path: Path) -> None:
    lst = listed(images, tmp_path)
    local(lst, 3)
    want = shard_files(tmp_path)
    second = lst.with_name("data-00001-of-00003.rec")
    data = bytearray(second.read_bytes())
    data[100] ^= 0xFF  # damaged after packing: its SHA-256 no longer matches
    second.write_bytes(bytes(data))
    lst.with_name("data-00002-of-00003.pack.json").unlink()  # never finished
    result = local(lst, 3, resume=True)
    assert [r.skipped for r in result.shards] == [True, False, False]
    assert shard_files(tmp_path) == want


@pytest.mark.slow
def test_an_interrupted_shard_says_it_starts_over(images: Path, tmp_path: Path) -> None:
    """Ctrl-C in shard 2 of 3: shard 1 is kept, shard 2's staging folder is
    removed (the message must not promise a partial output), and --resume
    packs the rest to the same bytes."""
    from im2rec.packing import PackInterrupted
    from im2rec.packing.sharding import RunHooks

    lst = listed(images, tmp_path / "want")
    local(lst, 3)
    want = shard_files(lst.parent)
    lst = listed(images, tmp_path / "cut")

    def interrupt(index: int, done: int, _bytes: int) -> None:
        if index == 1 and done == 5:
            raise KeyboardInterrupt

    specs = shard_specs(lst, read_lst(lst), 3, RESIZE, str(images))
    with LocalExecutor(2) as pool, pytest.raises(PackInterrupted) as err:
        LocalRunner(pool).run(specs, RunHooks(False, lambda _r: None, interrupt))
    assert str(err.value).startswith("data-00001-of-00003: interrupted; the finished shards")
    assert "this one starts over" in str(err.value) and "--resume" in str(err.value)
    assert err.value.exit_code == 130
    assert lst.with_name("data-00000-of-00003.pack.json").exists()
    assert not list(lst.parent.glob(".*staging")) and not list(lst.parent.glob("*partial*"))
    result = local(lst, 3, resume=True)
    assert [r.skipped for r in result.shards] == [True, False, False]
    assert shard_files(lst.parent) == want


def test_without_dask_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ConfigError, match=r"pip install 'im2rec\[dask\]'"):
        DaskRunner()
    result = CliRunner().invoke(main, ["pack", "x.lst", "--shards", "2", "--executor", "dask"])
    assert result.exit_code == 2 and "pip install 'im2rec[dask]'" in result.output


def test_workers_that_cannot_see_the_data_fail_before_any_work(
    images: Path, tmp_path: Path, cluster: DaskRunner
) -> None:
    with pytest.raises(DatasetError, match=r"tcp://.*cannot see the image root /nowhere"):
        cluster.check(Path("/nowhere"), "a.jpg", tmp_path)
    with pytest.raises(DatasetError, match="cannot write to .*shared filesystem"):
        cluster.check(images, "class0/000.jpg", tmp_path / "missing")


@pytest.mark.slow
def test_an_unreachable_scheduler() -> None:
    with pytest.raises(Im2RecError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        DaskRunner("tcp://127.0.0.1:9", timeout="1s")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--executor", "dask"], "--executor dask packs shards: add --shards N"),
        (["--global-index"], "--global-index indexes shards: add --shards N"),
        (["--scheduler", "tcp://x:8786"], "--scheduler needs --executor dask"),
    ],
)
def test_option_mistakes(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["pack", "x.lst", *args])
    assert result.exit_code == 2 and message in result.output


@pytest.mark.slow
def test_rec_pack_on_a_local_dask_cluster(images: Path, tmp_path: Path) -> None:
    """The real command: a LocalCluster of 2 processes, --json, then --resume."""
    lst = listed(images, tmp_path)
    rec = shutil.which("rec", path=os.path.dirname(sys.executable))
    assert rec is not None
    cmd = [rec, "pack", str(lst), "--root", str(images), "--resize", "40", "--quality", "90",
           "--shards", "2", "--executor", "dask", "--num-workers", "2", "--global-index"]  # fmt: skip
    done = subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)[0]
    assert report["records"] == 60 and report["count"] == 2 and report["global_index"]
    assert {s["worker"].startswith("tcp://") for s in report["shards"]} == {True}
    again = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, check=True)
    assert "2 shard(s) already packed and verified (--resume), 0 packed now" in again.stdout


@pytest.mark.slow
def test_the_scheduler_address_from_the_environment(
    images: Path, tmp_path: Path, cluster: DaskRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    lst = listed(images, tmp_path)
    monkeypatch.chdir(tmp_path)
    address = cluster.client.scheduler.address
    result = CliRunner(env={"DASK_SCHEDULER_ADDRESS": address}).invoke(
        main,
        [
            "pack",
            lst.name,
            "--root",
            str(images),
            "--resize",
            "40",
            "--quality",
            "90",
            "--shards",
            "2",
            "--executor",
            "dask",
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    workers = set(cluster.client.scheduler_info()["workers"])
    lines = result.output.splitlines()
    rows = [line.split() for line in lines if line.strip().startswith("0000")]
    assert [row[0] for row in rows] == ["00000", "00001"]  # the per-shard table
    assert sum(int(row[1]) for row in rows) == 60 and {row[-1] for row in rows} <= workers
    # another shard count later: the old shards are pointed out, not deleted
    again = CliRunner().invoke(main, ["pack", lst.name, "--root", str(images), "--shards", "3",
                                      "--resize", "40", "--quality", "90"])  # fmt: skip
    assert again.exit_code == 0 and "data-00000-of-00002.idx" in again.output
    assert lst.with_name("data-00000-of-00002.rec").exists()
