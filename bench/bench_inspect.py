"""``rec verify`` and ``rec index`` against reading the file (``cat > /dev/null``).

    make bench      # or: .venv/bin/python bench/bench_inspect.py

Writes a ``--size-mb`` ``.rec`` of image-sized records (40-160 KB of random
bytes each), then times, best of ``--repeat`` with a warm page cache, the
whole commands: ``cat FILE > /dev/null``, ``rec verify FILE``, ``rec index
FILE``. Speed is reported relative to cat (1.0 = as fast as reading the file);
the target is at least 0.5. When allowed (root on Linux) the same is measured
with the page cache dropped before each run.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchutil import (  # bench/ is on sys.path when run as a script
    compile_package,
    drop_caches,
    ratio,
    save_results,
)

TARGET = 0.5


def make_rec(path: Path, size_mb: int) -> int:
    from im2rec.recordio import IndexedRecordWriter, IRHeader, pack

    rng = random.Random(0)
    n, total = 0, 0
    with IndexedRecordWriter(path) as w:
        while total < size_mb << 20:
            payload = rng.randbytes(rng.randint(40_000, 160_000))
            w.write_key(n, pack(IRHeader(0, n % 1000, n, 0), payload))
            n, total = n + 1, total + len(payload)
    return n


def timed(cmd: list[str], cold: bool) -> float:
    if cold:
        drop_caches()
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    compile_package()
    rec_cli = str(Path(sys.executable).with_name("rec"))
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="im2rec-bench-inspect-") as tmp:
        path = Path(tmp) / "big.rec"
        records = make_rec(path, args.size_mb)
        commands = {
            "cat": ["sh", "-c", f"cat {path} > /dev/null"],
            "verify": [rec_cli, "verify", str(path)],
            "index": [rec_cli, "index", str(path), "-o", str(Path(tmp) / "rebuilt.idx")],
        }
        modes = ["warm", "cold"] if drop_caches() else ["warm"]
        for mode in modes:
            cold = mode == "cold"
            if not cold:
                timed(commands["cat"], False)  # warm the cache
            times = {
                k: min(timed(c, cold) for _ in range(args.repeat)) for k, c in commands.items()
            }
            results[mode] = {**{f"{k}_s": v for k, v in times.items()},
                             "verify_speed": times["cat"] / times["verify"],
                             "index_speed": times["cat"] / times["index"]}  # fmt: skip
    ok = all(r["verify_speed"] >= TARGET and r["index_speed"] >= TARGET for r in results.values())
    save_results("inspect", {"records": records, "mb": args.size_mb, "results": results}, [
        ratio(f"rec {what}, {mode} cache", "cat", r[f"{what}_speed"], TARGET)
        for mode, r in results.items() for what in ("verify", "index")
    ])  # fmt: skip
    if args.json:
        summary = {"records": records, "mb": args.size_mb, "results": results, "targets_met": ok}
        print(json.dumps(summary, indent=1))
        sys.exit(0 if ok else 1)
    print(f"{args.size_mb:,} MB .rec, {records:,} records")
    print(
        f"{'cache':<6} {'cat':>8} {'verify':>8} {'index':>8}  speed vs cat: verify, index (target >= {TARGET})"
    )
    for mode, r in results.items():
        print(f"{mode:<6} {r['cat_s']:>7.2f}s {r['verify_s']:>7.2f}s {r['index_s']:>7.2f}s  "
              f"{r['verify_speed']:.2f}x, {r['index_speed']:.2f}x")  # fmt: skip
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
