"""``rec export --to parquet`` and ``rec import parquet`` against copying the
same bytes with ``cat``, cold cache, start-up included.

    .venv/bin/python bench/bench_parquet.py [--size-mb 500] [--runs 5]

The ``.rec`` of ``bench_convert.py`` (``--size-mb`` MB of 60-140 kB
JPEG-signed records) is exported into a Hub dataset folder and imported
back (checked byte-identical to the original). Each round runs ``cat
data.rec > copy.rec``, the export and the import as fresh processes,
alternating, each with its inputs evicted from the page cache and its final
``sync`` timed (``bench_convert.timed``): best of ``--runs`` and the median
of each round's ratio. Target: both >= 0.5x cat's speed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_convert import REC, make_rec, read_once, timed
from benchutil import compile_package, ratio, save_results

from im2rec.packing.resuming import sha256_file

TARGET = 0.5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=500)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    compile_package()
    samples: dict[str, list[float]] = {"cat": [], "export": [], "import": []}
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-parquet-") as tmp_s:
        tmp = Path(tmp_s)
        rec = tmp / "data.rec"
        n = make_rec(rec, args.size_mb)
        size = rec.stat().st_size
        want = sha256_file(rec)
        hub = tmp / "hub"
        for _ in range(args.runs):
            (tmp / "copy.rec").unlink(missing_ok=True)
            samples["cat"].append(timed(f"cat '{rec}' > '{tmp / 'copy.rec'}'", [rec], True,
                                        shell=True))  # fmt: skip
            shutil.rmtree(hub, ignore_errors=True)
            export = [*REC, "export", str(rec), "--to", "parquet", "-o", str(hub), "-q"]
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
    results = {"bytes": size, "records": n, "shards": len(shards), "parquet_bytes": parquet_bytes,
               "seconds": {k: [round(t, 3) for t in v] for k, v in samples.items()}}  # fmt: skip
    for name in ("export", "import"):
        results[f"{name}_ratio"] = best["cat"] / best[name]
        results[f"{name}_paired_ratio"] = statistics.median(
            c / t for c, t in zip(samples["cat"], samples[name], strict=True)
        )
        results[f"{name}_mb_s"] = size / 1e6 / best[name]
    results["cat_mb_s"] = size / 1e6 / best["cat"]
    met = all(results[f"{name}_ratio"] >= TARGET for name in ("export", "import"))
    save_results("parquet", results, [
        ratio(f"rec {name} (Parquet), cold cache", "cat", results[f"{name}_ratio"], TARGET)
        for name in ("export", "import")
    ])  # fmt: skip
    print(f"{size / 1e6:,.0f} MB, {n:,} records -> {len(shards)} Parquet shard(s); cold cache")
    print(f"  cat                        {results['cat_mb_s']:8,.0f} MB/s")
    for name in ("export", "import"):
        print(f"  rec {name:6} (Parquet)      {results[f'{name}_mb_s']:8,.0f} MB/s   "
              f"{results[f'{name}_ratio']:.2f}x cat (target {TARGET}x; median of each round's "
              f"{results[f'{name}_paired_ratio']:.2f}x)")  # fmt: skip
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
