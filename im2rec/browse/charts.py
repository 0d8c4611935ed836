"""The statistics the page draws as charts, from the scan's arrays (a
bincount over the records: nothing a record is kept in Python): class
histogram, objects per image, box sizes, image sizes and aspects, record
sizes. A bar of image sizes or aspects names the filter that shows its
records, so a chart is also a filter with counts."""

from __future__ import annotations

from typing import Any

import numpy as np

from .kept import IMAGED, UNDECODABLE
from .scanning import BOX_BINS, CHUNK, Scanner, measures

__all__ = ["ASPECT_EDGES", "SIDE_EDGES", "charts"]

#: the longer side's bins, in pixels
SIDE_EDGES = (0, 32, 64, 128, 256, 512, 1024, 2048, 4096, 65536)
#: the aspect's (width / height) bins
ASPECT_EDGES = (0.0, 0.5, 0.75, 0.9, 1.1, 1.34, 2.0, 1e9)
#: the classes a histogram shows (the most frequent)
TOP_CLASSES = 60
#: objects per image from which the bars are one
MOST_OBJECTS = 30


def _bar(label: str, count: Any, **filters: str) -> dict[str, Any]:
    return {"label": label, "count": int(count), **({"filter": filters} if filters else {})}


def _edge(value: float) -> str:
    return "∞" if value >= 1e9 else f"{value:g}"


def charts(scanner: Scanner, names: dict[int, str]) -> dict[str, Any]:
    """Each chart as ``{"title", "bars": [{"label", "count", "filter"?}]}``,
    or ``"pending"`` where the pass it needs is still running."""
    scan, facts = scanner.scan, scanner.facts
    out: dict[str, Any] = {}
    if not scan.finished:
        return {"pending": True}
    top = sorted(scanner.state(names)["classes"], key=lambda c: -c["count"])[:TOP_CLASSES]
    out["classes"] = {"title": "records per class", "bars": [
        _bar(c["name"], c["count"], **{"class": str(c["label"])}) for c in top]}  # fmt: skip
    objects = np.zeros(MOST_OBJECTS + 1, np.int64)
    sizes = np.zeros(33, np.int64)
    sides = np.zeros(len(SIDE_EDGES) - 1, np.int64)
    aspects = np.zeros(len(ASPECT_EDGES) - 1, np.int64)
    images = scan.images_finished
    for low in range(0, scanner.count, CHUNK):  # (a chunk at a time: memory flat in the count)
        rows = slice(low, min(low + CHUNK, scanner.count))
        objects += np.bincount(np.minimum(facts.objects[rows], MOST_OBJECTS),
                               minlength=MOST_OBJECTS + 1)  # fmt: skip
        stored = facts.bytes[rows]
        sizes += np.bincount(np.log2(stored[stored > 0]).astype(np.int64), minlength=33)[:33]
        if images:
            seen = (facts.state[rows] & (IMAGED | UNDECODABLE)) == IMAGED
            side, aspect = measures(facts, rows)
            sides += np.histogram(side[seen], SIDE_EDGES)[0]
            aspects += np.histogram(aspect[seen], ASPECT_EDGES)[0]
    if objects[1:].any():
        out["objects"] = {
            "title": "objects per image",
            "bars": [
                _bar(f"{k}+" if k == MOST_OBJECTS else str(k), n) for k, n in enumerate(objects)
            ],
        }
        out["boxes"] = {"title": "box side (share of the image's)", "bars": [
            _bar(f"{k / BOX_BINS:.2f}", n) for k, n in enumerate(scanner.box_sizes)]}  # fmt: skip
    if sizes.any():
        low, high = np.flatnonzero(sizes)[[0, -1]]
        out["bytes"] = {"title": "record size (bytes)", "bars": [
            _bar(_bytes(1 << k), sizes[k]) for k in range(low, high + 1)]}  # fmt: skip
    if not images:
        out["images_pending"] = True
        return out
    out["sides"] = {"title": "image size (longer side, pixels)", "bars": [
        _bar(f"{a}-{b}", n, side=f"{a}-{b}")
        for a, b, n in zip(SIDE_EDGES, SIDE_EDGES[1:], sides, strict=False)]}  # fmt: skip
    out["aspects"] = {"title": "aspect (width / height)", "bars": [
        _bar(f"{_edge(a)}-{_edge(b)}", n, aspect=f"{a:g}-{b:g}")
        for a, b, n in zip(ASPECT_EDGES, ASPECT_EDGES[1:], aspects, strict=False)]}  # fmt: skip
    return out


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n} {unit}"
        n //= 1024
    return f"{n} GiB"
