"""make bench's results as data: each benchmark saves its ratios and
measurements as JSON (bench/benchutil.save_results), and bench/charts.py
draws them for docs/performance.md, the same bytes for the same results."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _save(
    results: Path, bench: str, rows: list[tuple[str, float, float | None]], data: dict
) -> None:
    code = (
        "import sys; sys.path.insert(0, 'bench')\n"
        "from benchutil import ratio, save_results\n"
        f"save_results({bench!r}, {data!r}, [ratio(l, 'the reference', v, t) for l, v, t in {rows!r}])\n"
    )
    env = {**os.environ, "IM2REC_BENCH_RESULTS": str(results)}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)


@pytest.mark.slow
def test_results_are_saved_and_drawn(tmp_path: Path) -> None:
    results, out = tmp_path / "results", tmp_path / "img"
    _save(
        results,
        "pack",
        [("rec pack --resize", 1.6, 1.2), ("rec pack --pass-through", 0.9, 1.0)],
        {"images": 10},
    )
    rows = [{"records": n, "open": n / 4e7, "first_open": n / 5e6, "rss": 24.0 * n,
             "mx_open": n / 3e6, "mx_rss": 190.0 * n} for n in (1_000_000, 10_000_000)]  # fmt: skip
    _save(results, "scale", [("open RecordDataset, 1M records", 12.5, 10.0)], {"sizes": rows})
    saved = json.loads((results / "pack.json").read_text())
    assert saved["bench"] == "pack" and saved["data"] == {"images": 10}
    assert saved["ratios"][1] == {"label": "rec pack --pass-through", "reference": "the reference",
                                  "ratio": 0.9, "target": 1.0}  # fmt: skip
    assert saved["machine"]["cpus"] and saved["when"] and "im2rec" in saved
    draw = [sys.executable, "bench/charts.py", "--results", str(results), "--out", str(out)]
    subprocess.run(draw, cwd=ROOT, check=True, capture_output=True)
    svg = (out / "ratios.svg").read_text()
    assert "rec pack --resize vs the reference" in svg and "1.60×" in svg
    assert svg.count('fill="#e65100"') == 1 + 1  # the one missed row (and the legend)
    assert "At scale" in svg and "rec pack" in svg
    scale = (out / "scale.svg").read_text()
    assert "MXNet MXIndexedRecordIO" in scale and scale.count("<polyline") == 5
    first = svg, scale
    subprocess.run(draw, cwd=ROOT, check=True, capture_output=True)
    assert ((out / "ratios.svg").read_text(), (out / "scale.svg").read_text()) == first


def test_every_benchmark_saves_its_results() -> None:
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        assert "save_results(" in script.read_text(), script.name


def test_the_performance_page_says_what_the_results_do(tmp_path: Path) -> None:
    """docs/performance.md's tables are written from bench/results by
    bench/report.py: the page as committed is what the results give, and a
    new result changes it (a missed target is listed as missed)."""
    check = [sys.executable, "bench/report.py", "--check"]
    done = subprocess.run(check, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    results = tmp_path / "results"
    results.mkdir()
    for path in (ROOT / "bench" / "results").glob("*.json"):
        (results / path.name).write_bytes(path.read_bytes())
    pack = json.loads((results / "pack.json").read_text())
    pack["ratios"][0]["ratio"] = 0.5  # under its target
    (results / "pack.json").write_text(json.dumps(pack))
    page = tmp_path / "performance.md"
    page.write_bytes((ROOT / "docs" / "performance.md").read_bytes())
    args = ["--results", str(results), "--page", str(page)]
    assert subprocess.run([*check, *args], cwd=ROOT, capture_output=True).returncode == 1
    subprocess.run([sys.executable, "bench/report.py", *args], cwd=ROOT, check=True)
    text = page.read_text()
    label = pack["ratios"][0]["label"]
    assert f"| rec pack | {label} | im2rec.py | 0.50× |" in text  # among the misses
    assert f"| {label} | im2rec.py | 0.50× | ≥ 1.00× | **missed** |" in text
    assert len(text.splitlines()) <= 300


def test_the_chart_shows_what_users_compare(tmp_path: Path) -> None:
    """It showed internal groups ("before_after ... vs im2rec a8d3f1c",
    "native"), said "vs mosaic vs MosaicML", cut long labels and ran its
    caption off the picture."""
    results, out = tmp_path / "results", tmp_path / "img"
    _save(results, "before_after", [("ImageRecordIter, random crop", 1.0, 0.95)], {})
    _save(results, "native", [("words: IndexedRecordWriter, 1 KB records", 1.2, None)], {})
    _save(results, "stream", [("stream from S3, cold, vs mosaic", 1.7, 1.0),
                              ("a label long enough that seventy characters would cut it off "
                               "before its end", 2.0, None)], {})  # fmt: skip
    subprocess.run([sys.executable, "bench/charts.py", "--results", str(results), "--out",
                    str(out)], cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    svg = (out / "ratios.svg").read_text()
    assert "random crop" not in svg and "words:" not in svg  # (im2rec against itself)
    assert "Streaming from a bucket" in svg and "vs mosaic vs" not in svg
    assert "stream from S3, cold vs the reference" in svg and "before its end vs" in svg
    width = float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))
    captions = re.findall(r'<text x="4" y="[\d.]+" fill="#555">(.*?)</text>', svg)
    assert len(captions) == 2
    for caption in captions:  # (each line within the picture, at about 6.5 px a character)
        assert 4 + 6.5 * len(re.sub(r"<[^>]+>", "", caption)) <= width, caption
