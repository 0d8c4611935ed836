"""Training straight from object storage: shuffled epochs of
decoded, augmented 224-px samples read from a far store, against the same
``.rec`` on local disk.

    make bench      # or: .venv/bin/python bench/bench_stream.py

A ``.rec`` of ``--images`` photo-like JPEGs (256-px short side, as
bench_loader.py makes them) is served from localhost by an HTTP range
server that adds ``--latency`` (20 ms) to every request and sends each
response at ``--bandwidth`` (100 MB/s) at most, what a far object store
costs (tests/rangeserver.py). Every row is one epoch of ``RecordDataset`` +
``Augmenter`` (RandomResizedCrop 224, flip, mean/std, float32) in a torch
``DataLoader`` with ``--workers`` workers, batches of 64, timed from the
start of the epoch (its workers started afresh) to its last batch; the
dataset is opened before (best of two runs):

- local disk, page cache warm, uniformly shuffled: the reference;
- the store through a block cache (``--block-mb`` blocks), ``BlockSampler``:
  cold (an empty cache folder) and warm (the folder filled by a cold run);
- the store read record by record, without a cache (informational, 200
  samples: it is too slow for an epoch);
- litdata's and MosaicML Streaming's datasets, and ours, each reading from
  a local S3 server (moto) behind a proxy with the same latency and
  bandwidth (tests/rangeserver.py; the peers in their own venv, ``make
  stream-peers``, bench/stream_peers.py), cold and warm.

Targets: cold >= 80 % of local, warm >= 95 %, and the cold epoch's
requests <= (file bytes / block bytes) x 1.1, and >= 1.5x litdata and
MosaicML cold. Each row checks that the epoch gave every record once
(count and label sum).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchutil import ratio, save_results  # bench/ is on sys.path when run as a script

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests.rangeserver: the server the tests use
from tests.rangeserver import proxying, serving  # noqa: E402

COLD_TARGET, WARM_TARGET, REQUEST_SLACK, PEER_TARGET = 0.8, 0.95, 1.1, 1.5

EPOCH = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import torch
from torch.utils.data import DataLoader
from im2rec.storage.blockcache import BlockCache
from im2rec.training import Augmenter, BlockSampler, RecordDataset

mode, where, cache_dir, workers, block_mb, limit = sys.argv[1:7]
workers, limit = int(workers), int(limit)
augment = Augmenter((3, 224, 224), random_resized_crop=True, min_random_area=0.08,
                    min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3, rand_mirror=True,
                    mean=(123.68, 116.78, 103.94), std=(58.4, 57.12, 57.38))
if mode == "cached":
    cache = BlockCache(cache_dir, budget=8 << 30, block_bytes=int(block_mb) << 20)
    dataset = RecordDataset(where, output="bytes", transform=augment, cache=cache)
    sampler = BlockSampler(dataset, seed=0)
    options = dict(sampler=sampler)
else:
    dataset = RecordDataset(where, output="bytes", transform=augment)
    indices = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(0))[:limit]
    options = dict(sampler=indices.tolist())
loader = DataLoader(dataset, batch_size=64, num_workers=workers, collate_fn=dataset.collate,
                    multiprocessing_context="fork", **options)
t0, n, labels = time.perf_counter(), 0, 0  # the epoch: its workers' start included
for images, label in loader:
    assert images.shape[1:] == (3, 224, 224)
    n += len(images)
    labels += int(label.sum())
seconds = time.perf_counter() - t0
print(json.dumps({"images_per_s": n / seconds, "images": n, "label_sum": labels,
                  "seconds": seconds}))
"""


def epoch(
    mode: str, where: str, cache: str, workers: int, block_mb: int, limit: int,
    env: dict[str, str] | None = None,
) -> Any:  # fmt: skip
    command = [sys.executable, "-c", EPOCH, mode, where, cache, str(workers), str(block_mb),
               str(limit)]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", **(env or {})))  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def against_peers(rec: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """litdata and MosaicML Streaming (bench/stream_peers.py, in their own
    venv) and im2rec, each reading from the same local S3 server (moto)
    through the same latency proxy: cold and warm epochs."""
    python = args.peers_python
    if not python or not os.path.exists(python):
        return {"why": f"no interpreter with litdata and MosaicML at {python} (make stream-peers)"}
    import logging

    import boto3
    from loader_ffcv import export_jpegs
    from moto.server import ThreadedMotoServer

    folder = work / "jpegs"
    folder.mkdir()
    export_jpegs(rec, folder)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    s3_url = f"http://{host}:{port}"
    keys = dict(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                AWS_DEFAULT_REGION="us-east-1")  # fmt: skip
    os.environ.update(keys)
    client = boto3.client("s3", endpoint_url=s3_url)
    client.create_bucket(Bucket="bench")
    for name in ("data.rec", "data.idx"):
        client.upload_file(str(rec.with_name(name)), "bench", f"im2rec/{name}")
    out: dict[str, Any] = {}
    try:
        with proxying(s3_url, args.latency, args.bandwidth) as proxy:
            env = dict(keys, AWS_ENDPOINT_URL=proxy.url)
            cache = str(work / "s3cache")
            url = "s3://bench/im2rec/data.rec"
            block_mb = args.block_mb
            out["im2rec"] = {
                "cold": epoch("cached", url, cache, args.workers, block_mb, 0, env)["images_per_s"],
                "warm": epoch("cached", url, cache, args.workers, block_mb, 0, env)["images_per_s"],
            }
            for which in ("litdata", "mosaic"):
                place = work / which
                place.mkdir()
                command = [python, str(HERE / "stream_peers.py"), which, str(folder), s3_url,
                           proxy.url, str(args.workers), str(place)]  # fmt: skip
                done = subprocess.run(command, capture_output=True, text=True,
                                      env=dict(os.environ, PYTHONWARNINGS="ignore"))  # fmt: skip
                if done.returncode:
                    out[which] = {"why": done.stderr.strip().splitlines()[-1:]}
                    continue
                out[which] = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        moto.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--latency", type=float, default=0.020, help="seconds added to each request")
    ap.add_argument("--bandwidth", type=float, default=100e6, help="bytes/s of each response")
    ap.add_argument("--block-mb", type=int, default=4)
    ap.add_argument("--peers-python", default=str(HERE.parent / ".venv-stream" / "bin" / "python"),
                    help="an interpreter with litdata and MosaicML Streaming (make stream-peers)")  # fmt: skip
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_loader import make_rec

    results: dict[str, Any] = {"latency_s": args.latency, "bandwidth": args.bandwidth,
                               "block_bytes": args.block_mb << 20}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-stream-") as tmp:
        served = Path(tmp) / "served"
        served.mkdir()
        rec = served / "data.rec"
        make_rec(rec, args.images)
        size = rec.stat().st_size
        results["file_bytes"] = size
        rec.read_bytes()  # the local reference reads from the page cache
        with serving(served, args.latency, args.bandwidth) as server:
            url = f"{server.url}/data.rec"
            runs: dict[str, list[Any]] = {"local": [], "cold": [], "warm": []}
            requests = []
            for attempt in range(2):
                runs["local"].append(epoch("plain", str(rec), "", args.workers, 0, args.images))
                cache = str(Path(tmp) / f"cache{attempt}")
                before = server.gets["/data.rec"]
                runs["cold"].append(epoch("cached", url, cache, args.workers, args.block_mb, 0))
                requests.append(server.gets["/data.rec"] - before)
                before = server.gets["/data.rec"]
                runs["warm"].append(epoch("cached", url, cache, args.workers, args.block_mb, 0))
                results["warm_requests"] = server.gets["/data.rec"] - before
            uncached = epoch("plain", url, "", args.workers, 0, 200)
        peers = against_peers(rec, Path(tmp), args)
    best = {name: max(r, key=lambda x: x["images_per_s"]) for name, r in runs.items()}
    local = best["local"]["images_per_s"]
    blocks = -(-size // (args.block_mb << 20))
    results.update({
        name: {"images_per_s": r["images_per_s"], "images": r["images"]}
        for name, r in best.items()
    })  # fmt: skip
    results["cold_requests"] = max(requests)
    results["request_budget"] = blocks * REQUEST_SLACK
    results["uncached_images_per_s"] = uncached["images_per_s"]
    cold, warm = best["cold"]["images_per_s"] / local, best["warm"]["images_per_s"] / local
    same = all(
        (r["images"], r["label_sum"]) == (local_run["images"], local_run["label_sum"])
        for r in (best["cold"], best["warm"])
        for local_run in (best["local"],)
    )
    met = cold >= COLD_TARGET and warm >= WARM_TARGET and max(requests) <= blocks * REQUEST_SLACK
    rows = [
        ratio("stream, cold cache", "local disk", cold, COLD_TARGET),
        ratio("stream, warm cache", "local disk", warm, WARM_TARGET),
    ]
    results["peers"] = peers
    names = {"litdata": "litdata StreamingDataset", "mosaic": "MosaicML StreamingDataset"}
    for which in ("litdata", "mosaic"):
        theirs = peers.get(which, {})
        if "cold" not in theirs:
            continue
        vs = peers["im2rec"]["cold"] / theirs["cold"]
        theirs["ratio_cold"], theirs["ratio_warm"] = vs, peers["im2rec"]["warm"] / theirs["warm"]
        met = met and vs >= PEER_TARGET
        same = same and (theirs["images"], theirs["label_sum"]) == (
            best["local"]["images"], best["local"]["label_sum"])  # fmt: skip
        rows.append(ratio(f"stream from S3, cold, vs {which}", names[which], vs, PEER_TARGET))
    results.update(cold_of_local=cold, warm_of_local=warm, same_records=same, targets_met=met)
    save_results("stream", results, rows)
    mb = size / 1e6
    print(f"{args.images:,} JPEGs ({mb:.0f} MB), served with {args.latency * 1e3:.0f} ms a "
          f"request and {args.bandwidth / 1e6:.0f} MB/s a response; {args.workers} workers, "
          f"batches of 64, RandomResizedCrop 224 + flip + normalise")  # fmt: skip
    print(f"{'local disk, shuffled':34} {local:7,.0f} images/s")
    print(f"{'store, block cache cold':34} {best['cold']['images_per_s']:7,.0f} images/s   "
          f"{cold:.0%} of local (target {COLD_TARGET:.0%}); {max(requests)} requests for "
          f"{blocks} blocks of {args.block_mb} MB (at most {blocks * REQUEST_SLACK:.1f})")  # fmt: skip
    print(f"{'store, block cache warm':34} {best['warm']['images_per_s']:7,.0f} images/s   "
          f"{warm:.0%} of local (target {WARM_TARGET:.0%}); "
          f"{results['warm_requests']} requests")  # fmt: skip
    print(
        f"{'store, a request per record':34} {uncached['images_per_s']:7,.0f} images/s   "
        "(200 samples, informational)"
    )
    if "im2rec" not in peers:
        print(f"litdata and MosaicML not measured: {peers.get('why')}")
    else:
        print("from a local S3 server (moto) behind the same latency and bandwidth, cold / warm:")
        mine = peers["im2rec"]
        print(f"{'im2rec, block cache':34} {mine['cold']:7,.0f} / {mine['warm']:7,.0f} images/s")
        for which in ("litdata", "mosaic"):
            theirs = peers[which]
            if "cold" not in theirs:
                print(f"{which:34} failed: {theirs.get('why')}")
                continue
            print(f"{names[which]:34} {theirs['cold']:7,.0f} / {theirs['warm']:7,.0f} images/s   "
                  f"im2rec {theirs['ratio_cold']:.2f}x cold (target {PEER_TARGET}x), "
                  f"{theirs['ratio_warm']:.2f}x warm")  # fmt: skip
    print(f"every record once an epoch, on every row: {same}")
    sys.exit(0 if met and same else 1)


if __name__ == "__main__":
    main()
