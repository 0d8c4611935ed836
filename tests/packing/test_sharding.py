"""Sharded packing, here and on a real Dask ``LocalCluster`` (2 worker
processes): same bytes as the local executor, retries after a killed worker,
resume, the global index, and the errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from im2rec.cli import main
from im2rec.executors import LocalExecutor
from im2rec.listing import ListOptions, make_lists
from im2rec.packing import PackOptions, pack_list
from im2rec.packing.cluster import LocalRunner
from im2rec.packing.sharding import ShardedResult, pack_sharded
from im2rec.recordio import RecordReader, load_index, unpack

RESIZE = PackOptions(resize=40, quality=90)


def listed(images: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    make_lists(images, folder / "data", ListOptions(recursive=True))
    return folder / "data.lst"


def local(lst: Path, shards: int, **kw: Any) -> ShardedResult:
    with LocalExecutor(2) as pool:
        return pack_sharded(lst, RESIZE, shards=shards, runner=LocalRunner(pool), **kw)


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
