"""Draw the benchmark results (bench/results/*.json, written by each
benchmark) as SVG charts for docs/performance.md: every ratio against its
reference, and the cost of an open index against the record count.

    python bench/charts.py [--results bench/results] [--out docs/img]

Plain SVG written by hand: no plotting package to install, and the same
results always draw the same bytes (the charts are committed).
"""

from __future__ import annotations

import argparse
import json
import math
from html import escape
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
#: the order benchmarks appear in, top to bottom
ORDER = ["recordio", "list", "annotations", "pack", "inspect", "loader", "mixture", "detection",
         "scale", "distributed", "imagenet", "remote", "stream", "convert", "parquet"]  # fmt: skip
#: benchmarks of im2rec against itself (an older commit, itself without a C
#: extension): in docs/performance.md's tables, not in the chart of what
#: im2rec does against the tools people compare it with
OWN = {"before_after", "native"}
TITLES = {
    "recordio": "RecordIO core", "list": "rec list", "pack": "rec pack",
    "annotations": "Detection annotations",
    "inspect": "rec verify / index / info", "loader": "Reading for training",
    "detection": "Detection training input", "mixture": "Mixtures",
    "scale": "At scale", "distributed": "Sharded packing on Dask",
    "imagenet": "rec imagenet", "remote": "Remote data (S3)", "convert": "WebDataset",
    "parquet": "Parquet (Hub)", "stream": "Streaming from a bucket",
}  # fmt: skip
FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'
MET, MISSED, NEUTRAL = "#2e7d32", "#e65100", "#607d8b"


def load(results: Path) -> list[dict[str, Any]]:
    docs = [json.loads(p.read_text()) for p in sorted(results.glob("*.json"))]
    return sorted(docs, key=lambda d: ORDER.index(d["bench"]) if d["bench"] in ORDER else 99)


def row_text(ratio: dict[str, Any]) -> str:
    """A bar's label: what im2rec did, against what (a label that names its
    reference already, "... vs litdata", says it once)."""
    label = ratio["label"].split(" vs ")[0].rstrip(", ")
    return f"{label} vs {ratio['reference']}"


def _x(value: float, left: float, width: float, low: float, high: float) -> float:
    value = min(max(value, low), high)
    return left + width * (math.log10(value) - math.log10(low)) / (
        math.log10(high) - math.log10(low)
    )


def ratios_svg(docs: list[dict[str, Any]]) -> str:
    """One bar a ratio (log scale), grouped by benchmark; the target as a
    tick; green when met (or when there is no target), orange when missed."""
    docs = [doc for doc in docs if doc["bench"] not in OWN]
    longest = max((len(row_text(r)) for doc in docs for r in doc["ratios"]), default=0)
    label_w, plot_w, row_h, low, high = max(300, 7 * longest), 420, 20, 0.25, 40.0
    rows: list[tuple[str, Any]] = []
    for doc in docs:
        if doc["ratios"]:
            rows.append(("title", doc))
            rows.extend(("row", r) for r in doc["ratios"])
    height = 76 + row_h * len(rows)
    left = label_w + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + plot_w + 70}" '
           f'height="{height}" {FONT} font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>']  # fmt: skip
    for tick in (0.25, 0.5, 1, 2, 5, 10, 20, 40):
        x = _x(tick, left, plot_w, low, high)
        out.append(f'<line x1="{x:.1f}" y1="30" x2="{x:.1f}" y2="{height - 20}" '
                   f'stroke="{"#000" if tick == 1 else "#ddd"}"/>')  # fmt: skip
        out.append(f'<text x="{x:.1f}" y="22" text-anchor="middle">{tick:g}×</text>')
    y = 40
    for kind, item in rows:
        if kind == "title":
            when = item["when"][:10]
            out.append(f'<text x="4" y="{y + 13}" font-weight="bold">{escape(TITLES.get(item["bench"], item["bench"]))}'
                       f'<tspan font-weight="normal" fill="#777"> ({when})</tspan></text>')  # fmt: skip
        else:
            r = item
            target = r.get("target")
            color = NEUTRAL if target is None else (MET if r["ratio"] >= target else MISSED)
            out.append(
                f'<text x="{label_w}" y="{y + 14}" text-anchor="end">{escape(row_text(r))}</text>'
            )
            x0, x1 = _x(1, left, plot_w, low, high), _x(r["ratio"], left, plot_w, low, high)
            out.append(f'<rect x="{min(x0, x1):.1f}" y="{y + 4}" width="{abs(x1 - x0):.1f}" '
                       f'height="{row_h - 8}" fill="{color}"/>')  # fmt: skip
            if target is not None:
                xt = _x(target, left, plot_w, low, high)
                out.append(f'<line x1="{xt:.1f}" y1="{y + 1}" x2="{xt:.1f}" y2="{y + row_h - 1}" '
                           'stroke="#000" stroke-width="2"/>')  # fmt: skip
            out.append(f'<text x="{max(x0, x1) + 4:.1f}" y="{y + 14}">{r["ratio"]:.2f}×</text>')
        y += row_h
    out.append(
        f'<text x="4" y="{height - 22}" fill="#555">im2rec against each reference: '
        "how many times as fast (higher is better; bars on a log scale)</text>"
    )
    out.append(f'<text x="4" y="{height - 6}" fill="#555">black tick: the target; '
               f'<tspan fill="{MET}">met</tspan>, <tspan fill="{MISSED}">missed</tspan>, '
               f'<tspan fill="{NEUTRAL}">no target</tspan></text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out) + "\n"


def scale_svg(doc: dict[str, Any]) -> str:
    """Open time and resident memory against the record count (log-log),
    im2rec beside MXNet's MXIndexedRecordIO."""
    rows = sorted(doc["data"]["sizes"], key=lambda r: r["records"])
    panels = [
        ("seconds to open an index", [("im2rec RecordDataset", "open", MET),
                                      ("im2rec, first open (parses the .idx)", "first_open", NEUTRAL),
                                      ("MXNet MXIndexedRecordIO", "mx_open", MISSED)], 1.0),
        ("MB resident after opening", [("im2rec RecordDataset", "rss", MET),
                                       ("MXNet MXIndexedRecordIO", "mx_rss", MISSED)], 1 / 2**20),
    ]  # fmt: skip
    width, height, pad = 420, 260, 50
    # the legends' lines under each panel, then the caption under the longest
    caption_y = 40 + height + 36 + 15 * max(len(series) for _, series, _ in panels) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * (width + pad) + 20}" '
           f'height="{caption_y + 12}" {FONT} font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>']  # fmt: skip
    xs = [r["records"] for r in rows]
    xlo, xhi = min(xs) / 1.5, max(xs) * 1.5
    for p, (title, series, scale) in enumerate(panels):
        ox, oy = 20 + p * (width + pad) + pad, 40
        values = [r[key] * scale for _, key, _ in series for r in rows if key in r]
        ylo = 10 ** math.floor(math.log10(min(values)))
        yhi = 10 ** math.ceil(math.log10(max(values)))
        out.append(f'<text x="{ox + width / 2}" y="24" text-anchor="middle" font-weight="bold">'
                   f"{escape(title)}</text>")  # fmt: skip
        out.append(f'<rect x="{ox}" y="{oy}" width="{width}" height="{height}" fill="none" '
                   'stroke="#999"/>')  # fmt: skip
        decade = ylo
        while decade <= yhi * 1.001:
            y = (
                oy
                + height
                - height
                * (math.log10(decade) - math.log10(ylo))
                / (math.log10(yhi) - math.log10(ylo))
            )
            out.append(
                f'<line x1="{ox}" y1="{y:.1f}" x2="{ox + width}" y2="{y:.1f}" stroke="#eee"/>'
            )
            out.append(f'<text x="{ox - 4}" y="{y + 4:.1f}" text-anchor="end">{decade:g}</text>')
            decade *= 10
        for n in xs:
            x = _x(n, ox, width, xlo, xhi)
            label = f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"
            out.append(
                f'<text x="{x:.1f}" y="{oy + height + 16}" text-anchor="middle">{label}</text>'
            )
        for i, (name, key, color) in enumerate(series):
            points = [
                (_x(r["records"], ox, width, xlo, xhi),
                 oy + height - height * (math.log10(r[key] * scale) - math.log10(ylo))
                 / (math.log10(yhi) - math.log10(ylo)))
                for r in rows if key in r
            ]  # fmt: skip
            if points:
                path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
                out.append(
                    f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>'
                )
                out.extend(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in points
                )
            out.append(f'<text x="{ox}" y="{oy + height + 36 + 15 * i}" fill="{color}">'
                       f"— {escape(name)}</text>")  # fmt: skip
    out.append(f'<text x="20" y="{caption_y}" fill="#555">records in the index (log scale); '
               f'measured {doc["when"][:10]} on {escape(doc["machine"]["cpu"])}</text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--out", type=Path, default=HERE.parent / "docs" / "img")
    args = ap.parse_args()
    docs = load(args.results)
    if not docs:
        raise SystemExit(f"{args.results}: no results; run `make bench` first")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ratios.svg").write_text(ratios_svg(docs))
    written = ["ratios.svg"]
    scale = next((d for d in docs if d["bench"] == "scale"), None)
    if scale is not None and scale["data"].get("sizes"):
        (args.out / "scale.svg").write_text(scale_svg(scale))
        written.append("scale.svg")
    print(f"drew {', '.join(written)} in {args.out} from {len(docs)} result files")


if __name__ == "__main__":
    main()
