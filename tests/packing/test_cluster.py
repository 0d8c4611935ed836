"""Packing on a Dask cluster: shards byte-identical to a local pack, a killed
worker retried, only verified shards skipped on --resume, and clear errors
for a missing Dask, workers that cannot see the data and an unreachable
scheduler."""

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

import pytest
from click.testing import CliRunner

from im2rec.cli import main
from im2rec.errors import ConfigError, DatasetError, Im2RecError
from im2rec.executors import LocalExecutor
from im2rec.listing.lstfile import read_lst
from im2rec.packing.cluster import DaskRunner, LocalRunner
from im2rec.packing.sharding import pack_sharded
from im2rec.packing.shards import shard_specs

from .test_sharding import RESIZE, listed, local

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskRunner]:
    with DaskRunner(workers=2) as runner:
        yield runner


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


def packed_here_listed_there(images: Path, tmp_path: Path, shards: int) -> Path:
    """Pack the list locally in tmp_path/local; return the same list in tmp_path/dask."""
    local(listed(images, tmp_path / "local"), shards)
    return listed(images, tmp_path / "dask")


def _kill_when_a_shard_starts(folder: str) -> None:
    """Runs inside each Dask worker: SIGKILL this worker as soon as any shard
    has started (its staging folder exists)."""

    def watch() -> None:
        while not any(name.endswith(".staging") for name in os.listdir(folder)):
            time.sleep(0.002)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


@pytest.mark.slow
def test_dask_shards_are_byte_identical_to_local(
    images: Path, tmp_path: Path, cluster: DaskRunner
) -> None:
    there = packed_here_listed_there(images, tmp_path, 4)
    result = pack_sharded(there, RESIZE, shards=4, runner=cluster)
    assert {r.worker for r in result.shards} <= set(cluster.client.scheduler_info()["workers"])
    assert shard_files(tmp_path / "dask") == shard_files(tmp_path / "local")
    assert not list((tmp_path / "dask").glob(".*staging"))


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
