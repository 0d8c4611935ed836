"""Detection labels in a finished ``.rec``: what ``rec info`` says of them
(objects per image, boxes per class, box sizes) and what ``rec verify
--boxes`` checks of each (the layout's rules, :mod:`im2rec.recordio.detection`).

Memory stays flat in the file's length: counts by number of objects and by
class (at most :data:`MAX_CLASSES` classes), and box sizes from the first
:data:`SIZE_SAMPLE` boxes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..recordio.detection import (
    Labels,
    check,
    headers_alone,
    kept,
    outside,
    problem,
    read_label,
)
from .tallies import Tally

__all__ = ["MAX_CLASSES", "SIZE_SAMPLE", "BoxStats", "label_problems"]

MAX_CLASSES = 1000  # classes (and numbers of objects an image) counted one by one
SIZE_SAMPLE = 1 << 20  # boxes whose sizes are kept (8 bytes each)


def _by_owner(owners: list[np.ndarray], boxes: list[np.ndarray]) -> np.ndarray:
    """The rows of each layout's boxes, each label's in file order."""
    width = min(b.shape[1] for b in boxes)  # (the five values every box has)
    rows = np.concatenate([b[:, :width] for b in boxes])
    return rows[np.argsort(np.concatenate(owners), kind="stable")]


def label_problems(values: Any) -> list[str]:
    """What is wrong with a record's label as a detection label: MXNet's
    refusals, then each object with a corner outside [0, 1] or an empty box
    (which MXNet drops without a word). Empty when it is a good one."""
    if values is None or np.ndim(values) == 0:
        return ["a single label, not a detection label (packed without --pack-label?)"]
    why = problem(values)
    if why is not None:
        return [why]
    objects = read_label(values).objects
    found = []
    for k in np.flatnonzero(outside(objects))[:5].tolist():
        corners = ", ".join(f"{v:g}" for v in objects[k, 1:5].tolist())
        found.append(f"object {k}: a corner ({corners}) outside [0, 1]")
    for k in np.flatnonzero(~kept(objects))[:5].tolist():
        found.append(f"object {k}: an empty box (MXNet drops it)")
    return found


class BoxStats:
    """Detection statistics, a batch of labels at a time (:meth:`add_labels`;
    :meth:`add` a record's label)."""

    def __init__(self) -> None:
        self.images = 0
        #: images whose label is the header alone (no object: rec list --keep-empty's)
        self.without_objects = 0
        self.not_detection = 0
        self.objects = 0
        self.per_image = Tally(MAX_CLASSES)
        self.per_class = Tally(MAX_CLASSES)
        self._sizes: list[np.ndarray] = []
        self._sized = 0

    def add(self, values: Any) -> None:
        if values is None or np.ndim(values) == 0:
            self.not_detection += 1
            return
        array = np.asarray(values).reshape(-1)
        self.add_labels(Labels(array, np.zeros(1, np.int64), np.array([len(array)], np.int64)))

    def add_labels(self, labels: Labels) -> None:
        """Labels in file order (:class:`~im2rec.recordio.detection.Labels`)."""
        faults, groups = check(labels)
        good = faults.code == 0
        images = int(good.sum())
        self.images += images
        # (a header alone of A >= 7 values is a good label: an image of no objects)
        alone = int((headers_alone(labels, faults) & ~good).sum()) if images < len(good) else 0
        self.without_objects += alone
        self.not_detection += len(good) - images - alone
        classes, sized = [], []
        if images == len(good) and all(group.kept.all() for group in groups):
            # (the usual: every label good and every box kept: no masks)
            counts = np.zeros(len(good), np.int64)
            for owner, objects, _, _, _ in groups:  # (owner rises: each label's rows in a run)
                counts += np.diff(np.searchsorted(owner, np.arange(len(good) + 1)))
                classes.append(objects[:, 0])
                if self._sized < SIZE_SAMPLE:
                    sized.append((owner, objects))
        else:
            counts = np.zeros(len(good), np.int64)
            for owner, objects, _, _, keep in groups:
                keep = keep & good[owner]
                counts += np.bincount(owner[keep], minlength=len(good))
                classes.append(objects[:, 0][keep])
                if self._sized < SIZE_SAMPLE:
                    sized.append((owner[keep], objects[keep]))
        self.objects += int(counts.sum())
        self.per_image.add_all(counts[good])
        if not classes:
            return
        found = classes[0] if len(classes) == 1 else np.concatenate(classes)
        self.per_class.add_all(found.astype(np.int64))
        if sized:
            owners, boxes = [o for o, _ in sized], [b for _, b in sized]
            rows = boxes[0] if len(boxes) == 1 else _by_owner(owners, boxes)
            take = rows[: SIZE_SAMPLE - self._sized]
            self._sizes.append(
                np.stack([take[:, 3] - take[:, 1], take[:, 4] - take[:, 2]], 1).astype(np.float32)
            )
            self._sized += len(take)

    @property
    def is_detection(self) -> bool:
        """Whether the records hold detection labels: most do, counting
        those of the header alone (those that do not are counted,
        ``not_detection``, and named by ``rec verify --boxes``: a damaged
        label in a detection rec is not a reason to describe it as
        something else)."""
        detection = self.images + self.without_objects
        return detection > 0 and detection >= self.not_detection

    def to_dict(self) -> dict[str, Any]:
        sizes = np.concatenate(self._sizes) if self._sizes else np.empty((0, 2), np.float32)

        def spread(column: np.ndarray) -> list[float] | None:
            if not len(column):
                return None
            low, mid, high = np.quantile(column, [0, 0.5, 1]).tolist()
            return [round(low, 4), round(mid, 4), round(high, 4)]

        per_image = self.per_image.counts()
        counts = list(per_image)  # (rising: the fewest and most among those counted)
        return {
            "images": self.images,
            # a header alone: no object (MXNet's iterator refuses them, RecordDataset reads them)
            "images_without_objects": self.without_objects,
            # records whose label is not one (damaged, or packed without --pack-label)
            "not_detection": self.not_detection,
            "objects": self.objects,
            "objects_per_image": {
                "min": counts[0] if counts else None,
                "mean": round(self.objects / self.images, 3) if self.images else None,
                "max": counts[-1] if counts else None,
                "images_by_count": {str(k): n for k, n in per_image.items()},
            },
            "boxes_per_class": {str(k): n for k, n in self.per_class.counts().items()},
            "boxes_of_other_classes": self.per_class.left,
            # min, median, max of each box's width and height, as fractions of the image
            "box_width": spread(sizes[:, 0]),
            "box_height": spread(sizes[:, 1]),
            "boxes_sized": int(len(sizes)),
        }
