"""``rec export --to parquet`` and ``rec import parquet`` against copying the
same bytes with ``cat``, cold cache, start-up included, for a classification
rec and a detection rec.

    .venv/bin/python bench/bench_parquet.py [--size-mb 500] [--runs 5]

The classification ``.rec`` is ``bench_convert.py``'s (``--size-mb`` MB of
60-140 kB JPEG-signed records); the detection ``.rec`` is as large, each
record a JPEG frame header (so its size is read as the export's pixel boxes
need) and a COCO-like label of 1-15 objects (7.3 a record, as in COCO
train2017). Each is exported into a Hub dataset folder (``--keep-header``;
the detection rec's boxes as ``objects`` in pixels) and imported back,
checked byte-identical to the original. Each round runs ``cat data.rec >
copy.rec``, the export and the import as fresh processes, alternating, each
with its inputs evicted from the page cache and its final ``sync`` timed
(``bench_convert.timed``): best of ``--runs`` and the median of each
round's ratio. Target: every one >= 0.5x cat's speed.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_convert import REC, make_rec, read_once, timed
from benchutil import compile_package, ratio, save_results

from im2rec.packing.resuming import sha256_file

TARGET = 0.5
KINDS = ("classification", "detection")


def make_det_rec(path: Path, size_mb: int) -> int:
    """``size_mb`` MB of detection records: a JPEG frame header (the image's
    size, 300-640 pixels a side) and random bytes, labelled ``4, 6, W, H``
    and 1-15 objects of six values."""
    from im2rec.recordio import IndexedRecordWriter, pack
    from im2rec.recordio.detection import make_label

    rng = random.Random(1)
    n = total = 0
    with IndexedRecordWriter(path) as w:
        while total < size_mb * 1_000_000:
            width, height = rng.randint(300, 640), rng.randint(300, 640)
            frame = (b"\xff\xd8\xff\xc0\x00\x11\x08" + height.to_bytes(2, "big")
                     + width.to_bytes(2, "big") + b"\x03" + bytes(9))  # fmt: skip
            payload = frame + rng.randbytes(rng.randint(60_000, 140_000))
            objects = []
            for _ in range(rng.choice((1, 2, 3, 5, 7, 9, 11, 15))):
                x0, y0 = rng.random() * 0.7, rng.random() * 0.7
                objects.append([rng.randrange(80), x0, y0, x0 + rng.random() * 0.3 + 0.01,
                                y0 + rng.random() * 0.3 + 0.01, rng.random() < 0.01])  # fmt: skip
            label = make_label(objects, (width, height))
            w.write_key(n, pack((len(label), label, n, 0), payload))
            n += 1
            total += len(payload)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=500)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    compile_package()
    results: dict[str, object] = {}
    ratios = []
    for kind in KINDS:
        found = run(kind, args.size_mb, args.runs)
        results[kind] = found
        ratios += [ratio(f"rec {name} (Parquet, {kind}), cold cache", "cat",
                         found[f"{name}_ratio"], TARGET) for name in ("export", "import")]  # fmt: skip
    save_results("parquet", results, ratios)
    met = True
    for kind in KINDS:
        found = results[kind]
        assert isinstance(found, dict)
        print(f"{kind}: {found['bytes'] / 1e6:,.0f} MB, {found['records']:,} records -> "
              f"{found['shards']} Parquet shard(s); cold cache")  # fmt: skip
        print(f"  cat                        {found['cat_mb_s']:8,.0f} MB/s")
        for name in ("export", "import"):
            met = met and found[f"{name}_ratio"] >= TARGET
            print(f"  rec {name:6} (Parquet)      {found[f'{name}_mb_s']:8,.0f} MB/s   "
                  f"{found[f'{name}_ratio']:.2f}x cat (target {TARGET}x; median of each round's "
                  f"{found[f'{name}_paired_ratio']:.2f}x)")  # fmt: skip
    sys.exit(0 if met else 1)


def run(kind: str, size_mb: int, runs: int) -> dict[str, Any]:
    """One kind's rounds: cat, export, import; the figures."""
    samples: dict[str, list[float]] = {"cat": [], "export": [], "import": []}
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-parquet-") as tmp_s:
        tmp = Path(tmp_s)
        rec = tmp / "data.rec"
        n = make_rec(rec, size_mb) if kind == "classification" else make_det_rec(rec, size_mb)
        size = rec.stat().st_size
        want = sha256_file(rec)
        hub = tmp / "hub"
        for _ in range(runs):
            (tmp / "copy.rec").unlink(missing_ok=True)
            samples["cat"].append(timed(f"cat '{rec}' > '{tmp / 'copy.rec'}'", [rec], True,
                                        shell=True))  # fmt: skip
            shutil.rmtree(hub, ignore_errors=True)
            export = [*REC, "export", str(rec), "--to", "parquet", "-o", str(hub), "--keep-header",
                      "-q"]  # fmt: skip
            samples["export"].append(timed(export, [rec, rec.with_suffix(".idx")], True))
            shards = sorted(hub.glob("data/*.parquet"))
            read_once(shards)
            for suffix in (".rec", ".idx"):
                (tmp / f"back{suffix}").unlink(missing_ok=True)
            back = [*REC, "import", "parquet", str(hub), "-o", str(tmp / "back"), "-q"]
            samples["import"].append(timed(back, shards, True))
        assert sha256_file(tmp / "back.rec") == want, "the imported .rec differs from the original"
        parquet_bytes = sum(p.stat().st_size for p in shards)
    best = {k: min(v) for k, v in samples.items()}
    results: dict[str, Any] = {
        "bytes": size, "records": n, "shards": len(shards), "parquet_bytes": parquet_bytes,
        "seconds": {k: [round(t, 3) for t in v] for k, v in samples.items()},
    }  # fmt: skip
    for name in ("export", "import"):
        results[f"{name}_ratio"] = best["cat"] / best[name]
        results[f"{name}_paired_ratio"] = statistics.median(
            c / t for c, t in zip(samples["cat"], samples[name], strict=True)
        )
        results[f"{name}_mb_s"] = size / 1e6 / best[name]
    results["cat_mb_s"] = size / 1e6 / best["cat"]
    return results


if __name__ == "__main__":
    main()
