"""``rec browse``'s scan of a ``.rec``, in the background, in two passes
over its blocks (:func:`~im2rec.recordio.blocks.walk_blocks`, as ``rec
info`` reads): the labels (classes, broken layouts, objects, box sizes,
record sizes: arrays a block at a time), then the images' headers (stored
size; none readable: undecodable). What it finds is one array a record
(:class:`~.kept.Facts`) and the (record, class) pairs, kept for the next
run (:mod:`.kept`), from which the filters and charts are answered."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import Im2RecError
from ..imaging.headers import image_size
from ..recordio import IndexedRecordReader, pack, unpack
from ..recordio.codec import HEAD_SIZE, IR_HEADER_SIZE, decode_length, image_start
from ..recordio.runs import runs
from .kept import BROKEN, IMAGED, UNDECODABLE, Facts, Writer, identities, kept_path, read_kept
from .kept import settled as settled_files
from .priority import PageFirst

__all__ = ["BOX_BINS", "CHUNK", "Scan", "Scanner", "Selection", "measures"]

#: box side (the square root of its share of the image) bins of the chart
BOX_BINS = 20
#: what the image pass reads of a payload at most: a header, not the image
_HEADER_BYTES = 1 << 16
_U16 = 65535
#: class numbers below this are counted in an array
_DENSE = 1 << 16
#: records a filter or a chart looks at at once
CHUNK = 1 << 20
#: where a record's labels start, from its frame's head
_LABELS = HEAD_SIZE + IR_HEADER_SIZE


@dataclass
class Scan:
    """Where the scan stands and its counts: records seen by the label pass
    (``done``), per class the records holding it, broken label layouts;
    records seen by the image pass, undecodable ones."""

    total: int = 0
    done: int = 0
    classes: dict[int, int] = field(default_factory=dict)
    broken: int = 0
    finished: bool = False
    images_done: int = 0
    undecodable: int = 0
    images_finished: bool = False
    started: bool = False
    kept: bool = False
    error: str | None = None

    def to_dict(self, names: dict[int, str]) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k != "classes"}
        out["classes"] = [{"label": k, "name": names.get(k, str(k)), "count": n}
                          for k, n in sorted(self.classes.items())]  # fmt: skip
        return out


class Selection(NamedTuple):
    """A filter of the grid: a class, a problem (``broken`` or
    ``undecodable``), ranges of the longer side in pixels and of the aspect
    (width / height), each half-open ``[low, high)``."""

    label: int | None = None
    problem: str | None = None
    side: tuple[float, float] | None = None
    aspect: tuple[float, float] | None = None


class Scanner:
    """The scan of one ``.rec``: started by :meth:`run` on a thread of its
    own, read by the server's handlers meanwhile."""

    def __init__(self, reader: IndexedRecordReader, path: str) -> None:
        self.reader, self.path = reader, path
        self.count = len(reader)
        self.scan = Scan(total=self.count)
        self.facts = Facts.in_memory(0)
        self.box_sizes = np.zeros(BOX_BINS, np.int64)
        self._pairs = (np.empty(0, np.int64), np.empty(0, np.int64))
        self._lock = threading.Lock()
        self._dense = np.zeros(0, np.int64)
        self._sparse: dict[int, int] = {}
        self._last: tuple[Selection, np.ndarray] | None = None
        self._page: PageFirst | None = None
        self._identity: list[str] | None = None
        if not reader.remote and not reader.index_scanned:
            self._identity = identities(path, os.fspath(reader.index_path))
        found = read_kept(kept_path(path), self.count, self._identity) if self._identity else None
        if found is not None:
            s = found.summary
            self.facts, self._pairs = found.facts, (found.labels, found.positions)
            self.box_sizes = np.asarray(s["box_sizes"], np.int64)[:BOX_BINS]
            self.scan = Scan(total=self.count, done=self.count, broken=int(s["broken"]),
                             classes={int(k): int(v) for k, v in s["classes"]},
                             finished=True, images_done=self.count,
                             undecodable=int(s["undecodable"]), images_finished=True,
                             started=True, kept=True)  # fmt: skip

    def start(self, stop: threading.Event, page: PageFirst | None = None) -> None:
        """:meth:`run` on a thread of its own, unless it has started (or
        the scan was kept), giving way to ``page``'s requests."""
        with self._lock:
            if self.scan.started:
                return
            self.scan.started = True
            self._page = page
        threading.Thread(target=self.run, args=(stop,), daemon=True,
                         name="im2rec-browse-scan").start()  # fmt: skip

    def run(self, stop: threading.Event) -> None:
        """Both passes, then the result kept (see the module doc); an error
        of the file stops the scan and is shown in the page."""
        scan = self.scan
        keeping = self._identity is not None and settled_files(self._identity)
        writer = Writer(self.path, self.count) if keeping else None
        self.facts = writer.facts if writer else Facts.in_memory(self.count)
        try:
            if not self._labels(stop) or not self._images(stop):
                return
            if writer is not None and identities(self.path, os.fspath(self.reader.index_path)) \
                    == self._identity:  # fmt: skip
                summary = {"identities": self._identity, "broken": scan.broken,
                           "undecodable": scan.undecodable,
                           "classes": sorted(scan.classes.items()),
                           "box_sizes": self.box_sizes.tolist()}  # fmt: skip
                scan.kept = writer.finish(*self._pairs, summary)
                found = read_kept(kept_path(self.path), self.count, self._identity)
                if found is not None:  # (the pairs too now mapped, not held)
                    self._pairs, self.facts = (found.labels, found.positions), found.facts
        except Im2RecError as exc:
            scan.error = str(exc)
        finally:
            if writer is not None and not scan.kept:
                writer.close()

    def _walk(self, stop: threading.Event) -> Any:
        """``(block, heads, fields, positions, known)`` for each run of whole
        records (heads into the block's data; positions in the index, and
        whether the record is in it), a record at a time for the rest."""
        from ..recordio.blocks import HEADER_FIELDS, Block, walk_blocks

        offsets = np.asarray(self.reader.index.offsets, np.int64)
        order = None if bool(np.all(offsets[1:] > offsets[:-1])) else np.argsort(offsets)
        ordered = offsets if order is None else offsets[order]
        for item in walk_blocks(self.reader):
            if self._page is not None:
                self._page.give_way()
            if stop.is_set():
                return
            if isinstance(item, Block):
                heads, fields, data = item.heads, item.header_fields(), item.data
                at, alone = heads + item.base, False
            else:  # (a split record, or one larger than a block: read whole)
                head, _ = item  # type: ignore[misc]
                at = np.array([head], np.int64)
                data, heads = bytes(_LABELS), np.zeros(1, np.int64)
                fields = np.zeros(1, HEADER_FIELDS)
                alone = True
            where = np.searchsorted(ordered, at).clip(0, max(len(offsets) - 1, 0))
            known = ordered[where] == at if len(offsets) else at < 0
            positions = where if order is None else order[where]
            if alone and known[0]:
                header, payload = unpack(self.reader[int(positions[0])])
                label = np.asarray(header.label, np.float32).reshape(-1)
                fields["flag"], fields["label"] = header.flag, 0.0 if header.flag else label[0]
                data = bytes(HEAD_SIZE) + pack(header, payload)
                fields["lrec"] = len(data) - HEAD_SIZE
            yield data, heads, fields, positions, known

    def _labels(self, stop: threading.Event) -> bool:
        scan, facts = self.scan, self.facts
        pairs: list[tuple[np.ndarray, np.ndarray]] = []  # (8 bytes a pair below 2**31 records)
        small = np.int32 if self.count < 2**31 else np.int64
        for data, heads, fields, positions, known in self._walk(stop):
            flags = fields["flag"].astype(np.int64)
            length = decode_length(fields["lrec"].astype(np.int64))
            many = np.flatnonzero(flags > 0)
            first = np.minimum(heads[many] + _LABELS, len(data) // 4 * 4)
            count = np.minimum(flags[many], (len(data) - first) // 4).clip(0)
            words = np.frombuffer(data, "<f4", count=len(data) // 4)
            values, starts = runs(words, first >> 2, count)
            found = _classes_of(flags, fields["label"].astype(np.float64), many, values, starts,
                                count)  # fmt: skip
            scan.broken += len(found.broken)
            keep = known[found.owner]
            pairs.append((positions[found.owner[keep]].astype(small),
                          found.classes[keep].astype(np.int32)))  # fmt: skip
            mine = positions[known]
            facts.bytes[mine] = (length - image_start(flags)).clip(0, None)[known]
            facts.objects[mine] = found.objects.clip(0, _U16)[known]
            facts.state[positions[found.broken[known[found.broken]]]] |= BROKEN
            self.box_sizes += found.box_sizes
            scan.done += len(heads)
            self._count(found.classes[keep])
        if stop.is_set():
            return False
        position = np.concatenate([p for p, _ in pairs]) if pairs else np.empty(0, np.int64)
        label = np.concatenate([c for _, c in pairs]) if pairs else np.empty(0, np.int64)
        order = np.lexsort((position, label))
        self._pairs = (label[order], position[order])
        with self._lock:
            self._counted()
        scan.finished = True
        return True

    def _images(self, stop: threading.Event) -> bool:
        """Each record's stored image size from its header (its first 64
        KiB: no decoding), or the undecodable mark where none is readable."""
        scan, facts = self.scan, self.facts
        for data, heads, fields, positions, known in self._walk(stop):
            view = memoryview(data)
            flags = fields["flag"].astype(np.int64)
            ends = np.minimum(heads + HEAD_SIZE + decode_length(fields["lrec"].astype(np.int64)),
                              len(data))  # fmt: skip
            starts = np.minimum(heads + HEAD_SIZE + image_start(flags), ends)
            sizes = np.zeros((len(heads), 2), np.int64)
            bad = np.zeros(len(heads), bool)
            for j in np.flatnonzero(known).tolist():
                start = int(starts[j])
                size = image_size(view[start : min(int(ends[j]), start + _HEADER_BYTES)])
                if size is None:
                    bad[j] = True
                else:
                    sizes[j] = size
            mine = positions[known]
            facts.height[mine] = sizes[known, 0].clip(0, _U16)
            facts.width[mine] = sizes[known, 1].clip(0, _U16)
            facts.state[mine] |= IMAGED
            facts.state[positions[known & bad]] |= UNDECODABLE
            scan.undecodable += int((known & bad).sum())
            scan.images_done += len(heads)
        if stop.is_set():
            return False
        scan.images_finished = True
        return True

    def _count(self, classes: np.ndarray) -> None:
        """Add a block's classes to the counts: a dense array for class
        numbers below :data:`_DENSE`, the scan's dict for the rest."""
        low = classes[classes < _DENSE]
        with self._lock:
            if len(low):
                top = int(low.max()) + 1
                if top > len(self._dense):
                    self._dense = np.concatenate([self._dense, np.zeros(top - len(self._dense),
                                                                        np.int64)])  # fmt: skip
                self._dense[:top] += np.bincount(low, minlength=top)
            high = classes[classes >= _DENSE]
            for c, n in zip(*np.unique(high, return_counts=True), strict=True):
                self._sparse[int(c)] = self._sparse.get(int(c), 0) + int(n)

    def _counted(self) -> None:
        """The scan's class counts made from the arrays (under the lock)."""
        dense = {int(c): int(self._dense[c]) for c in np.flatnonzero(self._dense)}
        self.scan.classes = {**dense, **self._sparse}

    def state(self, names: dict[int, str]) -> dict[str, Any]:
        """The scan's progress and counts, as the page shows them."""
        with self._lock:
            if self.scan.started and not self.scan.finished:
                self._counted()
            return self.scan.to_dict(names)

    def _keeps(self, chosen: Selection, rows: np.ndarray) -> np.ndarray:
        """Which of the records ``rows`` the filter keeps (a class aside)."""
        facts = self.facts
        keep = np.ones(len(rows), bool)
        state = facts.state[rows]
        if chosen.problem is not None:
            keep &= (state & (BROKEN if chosen.problem == "broken" else UNDECODABLE)) != 0
        if chosen.side is not None or chosen.aspect is not None:
            side, aspect = measures(facts, rows)
            keep &= (state & UNDECODABLE) == 0
            if chosen.side is not None:
                keep &= (side >= chosen.side[0]) & (side < chosen.side[1])
            if chosen.aspect is not None:
                keep &= (aspect >= chosen.aspect[0]) & (aspect < chosen.aspect[1])
        return keep

    def members(self, label: int) -> np.ndarray | None:
        """The records holding class ``label``, in index order (None until
        the label pass is done)."""
        if not self.scan.finished:
            return None
        labels, positions = self._pairs
        low, high = np.searchsorted(labels, [label, label + 1])
        return positions[low:high]

    def select(self, chosen: Selection) -> np.ndarray | None:
        """The records ``chosen`` keeps, in index order; None until the
        pass it needs is done."""
        images = chosen.side is not None or chosen.aspect is not None or \
            chosen.problem == "undecodable"  # fmt: skip
        if not self.scan.finished or (images and not self.scan.images_finished):
            return None
        with self._lock:
            if self._last is not None and self._last[0] == chosen:
                return self._last[1]
        base = None if chosen.label is None else self.members(chosen.label)
        n = self.count if base is None else len(base)
        parts = [np.empty(0, np.int64)]
        for low in range(0, n, CHUNK):  # (a chunk at a time: memory flat in the count)
            rows = np.arange(low, min(low + CHUNK, n)) if base is None else base[low : low + CHUNK]
            parts.append(rows[self._keeps(chosen, rows)])
        found = np.concatenate(parts)
        with self._lock:
            self._last = (chosen, found)
        return found


def measures(facts: Facts, rows: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
    """The longer side in pixels and the aspect (width / height) of the
    records ``rows``, as the filters and the charts both bin them."""
    width = facts.width[rows].astype(np.float64)
    height = facts.height[rows].astype(np.float64)
    return np.maximum(width, height), width / np.maximum(height, 1)


class _Found(NamedTuple):
    """A block's labels read: ``(owner, classes)`` pairs (each once), the
    records whose detection label is broken, objects per record, the box
    side histogram."""

    owner: np.ndarray
    classes: np.ndarray
    broken: np.ndarray
    objects: np.ndarray
    box_sizes: np.ndarray


def _classes_of(
    flags: np.ndarray, labels: np.ndarray, many: np.ndarray, values: np.ndarray,
    starts: np.ndarray, counts: np.ndarray,
) -> _Found:  # fmt: skip
    """What a block's labels hold (``values[starts[k]:][:counts[k]]`` the
    label of record ``many[k]``): a single label that is a class number; a
    detection label's objects; a multi-label record's class numbers."""
    from ..recordio.detection import Labels, check, claims_boxes

    single = np.flatnonzero((flags == 0) & (labels >= 0) & (labels == np.floor(labels)))
    owners, classes = [single], [labels[single].astype(np.int64)]
    broken = np.empty(0, np.int64)
    objects = np.zeros(len(flags), np.int64)
    box_sizes = np.zeros(BOX_BINS, np.int64)
    if len(many):
        values = np.asarray(values, np.float64)
        head = values[np.minimum(starts, max(len(values) - 1, 0))] if len(values) else values
        boxed = claims_boxes(head, counts)
        if boxed.any():
            pick = np.flatnonzero(boxed)
            faults, groups = check(Labels(values, starts[pick], counts[pick]))
            broken = many[pick[faults.code != 0]]
            for group in groups:
                fine = (faults.code[group.owner] == 0) & (group.objects[:, 0] >= 0)
                owner = many[pick[group.owner[fine]]]
                objects += np.bincount(owner, minlength=len(flags))
                owners.append(owner)
                classes.append(np.asarray(group.objects[fine, 0], np.int64))
                rows = group.objects[fine]
                area = np.clip((rows[:, 3] - rows[:, 1]) * (rows[:, 4] - rows[:, 2]), 0, 1)
                bins = np.minimum((np.sqrt(area) * BOX_BINS).astype(np.int64), BOX_BINS - 1)
                box_sizes += np.bincount(bins, minlength=BOX_BINS)
        plain = np.flatnonzero(~boxed)
        if len(plain):
            rows = np.repeat(many[plain], counts[plain])
            picked = runs(values, starts[plain], counts[plain])[0]
            whole = (picked >= 0) & (picked == np.floor(picked))
            owners.append(rows[whole])
            classes.append(picked[whole].astype(np.int64))
    if len(owners) == 1:  # (single labels only: one class a record already)
        return _Found(single, classes[0], broken, objects, box_sizes)
    owner = np.concatenate(owners)
    cls = np.concatenate(classes)
    key = np.unique(owner.astype(np.int64) * (1 << 25) + cls.clip(-1, (1 << 24)) + 1)
    return _Found(key >> 25, (key & ((1 << 25) - 1)) - 1, broken, objects, box_sizes)
