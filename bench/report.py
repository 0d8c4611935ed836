"""docs/performance.md's figures, written from bench/results/*.json.

The page holds its tables between markers; this script writes each one
from the results files (``make bench`` runs it after the benchmarks, ``make
charts`` with the charts), so a new run updates the page without a hand
edit and the page never says what the results do not:

    <!-- results: pack -->            one benchmark's rows (and its machine)
    <!-- results: * -->               every benchmark's rows, one table
    <!-- results: missed -->          the rows whose target the last run missed
    <!-- results: scale-sizes -->     bench_scale.py's per-size figures
    <!-- /results -->

    .venv/bin/python bench/report.py            # write the page
    .venv/bin/python bench/report.py --check    # exit 1 if the page differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent / "docs" / "performance.md"
BLOCK = re.compile(r"(<!-- results: ([\w*-]+) -->\n)(.*?)(<!-- /results -->)", re.S)

#: the benchmarks in the page's order, and what each is called there
NAMES = {
    "recordio": "RecordIO core",
    "list": "rec list",
    "annotations": "Detection annotations at scale",
    "pack": "rec pack",
    "inspect": "rec verify, rec index, rec info",
    "loader": "Reading for training",
    "mixture": "Mixtures",
    "detection": "Detection training input",
    "stream": "Training from a store",
    "remote": "Reading from S3",
    "scale": "At scale",
    "distributed": "Sharded packing on Dask",
    "imagenet": "rec imagenet",
    "convert": "WebDataset export and import",
    "parquet": "Parquet export and import",
    "native": "What the C extensions buy",
    "browse": "rec browse",
}


def load(results: Path) -> dict[str, dict[str, Any]]:
    """Each results file by its benchmark's name."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}


def _ratio(value: float) -> str:
    return f"{value:,.2f}×" if value < 100 else f"{value:,.0f}×"


def _status(row: dict[str, Any]) -> str:
    if row["target"] is None:
        return ""
    return "met" if row["ratio"] >= row["target"] else "**missed**"


def _rows(doc: dict[str, Any], bench: str | None = None) -> list[str]:
    out = []
    for row in doc["ratios"]:
        target = "" if row["target"] is None else f"≥ {_ratio(row['target'])}"
        first = f"{bench} | " if bench else ""
        out.append(f"| {first}{row['label']} | {row['reference']} | {_ratio(row['ratio'])} | "
                   f"{target} | {_status(row)} |")  # fmt: skip
    return out


def where(doc: dict[str, Any]) -> str:
    """The run a table is of: machine, Python, commit, date."""
    machine = doc.get("machine") or {}
    cpu = machine.get("cpu") or "an unnamed CPU"
    cpus = machine.get("cpus")
    python = machine.get("python", "")
    return (f"Measured on {cpu}" + (f", {cpus} CPUs" if cpus else "") +
            (f", Python {python}" if python else "") +
            f"; im2rec at `{doc.get('commit', '?')}`, {str(doc.get('when', ''))[:10]}.")  # fmt: skip


def table(name: str, docs: dict[str, dict[str, Any]]) -> str:
    """The markdown that goes between the markers of ``name``."""
    if name == "*":
        head = [
            "| benchmark | im2rec | against | ratio | target | |",
            "|---|---|---|---:|---:|---|",
        ]
        rows = [r for bench, title in NAMES.items() if bench in docs
                for r in _rows(docs[bench], title)]  # fmt: skip
        return "\n".join([*head, *rows]) + "\n"
    if name == "missed":
        missed = [f"| {title} | {row['label']} | {row['reference']} | {_ratio(row['ratio'])} | "
                  f"≥ {_ratio(row['target'])} |"
                  for bench, title in NAMES.items() if bench in docs
                  for row in docs[bench]["ratios"]
                  if row["target"] is not None and row["ratio"] < row["target"]]  # fmt: skip
        if not missed:
            return "Every target is met in the runs recorded.\n"
        head = ["| benchmark | im2rec | against | ratio | target |", "|---|---|---|---:|---:|"]
        return "\n".join([*head, *missed]) + "\n"
    if name == "scale-sizes":
        return _scale_sizes(docs["scale"])
    doc = docs[name]
    head = ["| im2rec | against | ratio | target | |", "|---|---|---:|---:|---|"]
    return "\n".join([*head, *_rows(doc), "", where(doc)]) + "\n"


def _scale_sizes(doc: dict[str, Any]) -> str:
    """bench_scale.py's figures for each index size: open, memory, reads,
    workers' memory, and the commands that read a whole file."""
    head = ["| records | open (first) | RSS a record | `read_idx` | PSS +, 4 workers "
            "forked / spawned | MXNet open, `read_idx`, PSS + | verify, info, index, merge |",
            "|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    rows = []
    mb = 1e6
    for row in doc["data"].get("sizes", []):
        n = row["records"]
        workers = (
            f"+{row['pss_growth'] / mb:,.0f} / +{row['spawn_pss_growth'] / mb:,.0f} MB"
            if "pss_growth" in row
            else ""
        )
        mx = (
            f"{row['mx_open']:.2f} s, {row['mx_read_us']:.1f} µs, "
            f"+{row['mx_pss_growth'] / mb:,.0f} MB"
            if row.get("mx_open")
            else "(not run)"
        )
        commands = ", ".join(
            f"{row[c]['seconds']:.1f} s {row[c]['peak'] / mb:,.0f} MB"
            for c in ("verify", "info", "index", "merge")
            if c in row
        )
        rows.append(
            f"| {n:,} | {row['open']:.2f} s ({row['first_open']:.2f} s) | "
            f"{row['rss'] / n:.1f} B | {row.get('read_us', 0):.2f} µs | {workers} | {mx} | "
            f"{commands} |"
        )
    return "\n".join([*head, *rows, "", where(doc)]) + "\n"


def render(page: str, docs: dict[str, dict[str, Any]]) -> str:
    """``page`` with every block written from ``docs``."""

    def fill(found: re.Match[str]) -> str:
        return found[1] + table(found[2], docs) + found[4]

    return BLOCK.sub(fill, page)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs")
    args = parser.parse_args()
    page = args.page.read_text()
    written = render(page, load(args.results))
    if args.check:
        if written != page:
            print(f"{args.page}: its figures are not those of {args.results}; run bench/report.py")
            return 1
        return 0
    if written != page:
        args.page.write_text(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
