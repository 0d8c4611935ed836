"""What a pack says it did: its result as JSON (a resumed run's rate counts
this run's entries), and the one error when every image of a list failed,
with its most likely cause."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from im2rec.packing.outcome import PackResult, all_failed, likely_cause


def result(**changes: object) -> PackResult:
    base = PackResult(Path("a.lst"), Path("a.rec"), Path("a.idx"), Path("a.pack.json"), None, 100, 98,
                      Counter({"missing": 2}), 5_000, 2.0)  # fmt: skip
    for key, value in changes.items():
        setattr(base, key, value)
    return base


def test_the_json_names_paths_or_urls_and_counts_this_runs_rate() -> None:
    d = result(resumed_from=60).to_dict()
    assert d["rec"] == "a.rec" and d["failures"] == {"missing": 2}
    assert d["images_per_second"] == (100 - 60) / 2.0
    published = result(urls={"rec": "s3://b/a.rec", "report": "s3://b/a.failures.tsv"})
    assert published.to_dict()["rec"] == "s3://b/a.rec"
    assert published.to_dict()["failure_report"] == "s3://b/a.failures.tsv"
    assert published.where("rec") == "s3://b/a.rec" and published.where("idx") == "a.idx"
    assert result(seconds=0.0).to_dict()["images_per_second"] is None


def test_the_likely_cause_of_a_list_that_failed_whole() -> None:
    assert "--root" in likely_cause(Counter({"missing": 3, "undecodable": 1}), "imgs")
    assert "under imgs" in likely_cause(Counter({"missing": 3}), "imgs")
    assert "are these image files" in likely_cause(Counter({"undecodable": 3, "missing": 1}), "")
    assert likely_cause(Counter({"unreadable": 2, "missing": 1}), "") == "see the failure report"


def test_every_image_failed_is_one_line_with_counts() -> None:
    text = all_failed("a.lst", 1200, Counter({"missing": 1000, "undecodable": 200}), "imgs",
                      listed_in=Path("a.failures.tsv"))  # fmt: skip
    assert text.startswith(
        "a.lst: every one of its 1,200 images failed (1,000 missing, 200 undecodable)"
    )
    assert (
        "(listed in a.failures.tsv), so no .rec was written; most were not found under imgs" in text
    )
    assert "\n" not in text
