"""Detection labels in a finished ``.rec``: what ``rec info`` says of them
(objects per image, boxes per class, box sizes) and what ``rec verify
--boxes`` checks of each (the layout's rules, :mod:`im2rec.recordio.detection`).

Memory stays flat in the file's length: counts by number of objects and by
class (at most :data:`MAX_CLASSES` classes), and box sizes from the first
:data:`SIZE_SAMPLE` boxes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..recordio.detection import kept, outside, problem, read_label

__all__ = ["MAX_CLASSES", "SIZE_SAMPLE", "BoxStats", "label_problems"]

MAX_CLASSES = 1000  # classes (and numbers of objects an image) counted one by one
SIZE_SAMPLE = 1 << 20  # boxes whose sizes are kept (8 bytes each)


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
    """Detection statistics, a record's label at a time (:meth:`add`)."""

    def __init__(self) -> None:
        self.images = 0
        self.not_detection = 0
        self.objects = 0
        self.per_image: Counter[int] = Counter()
        self.per_class: Counter[int] = Counter()
        self.classes_overflow = 0
        self._sizes: list[np.ndarray] = []
        self._sized = 0

    def add(self, values: Any) -> None:
        if values is None or np.ndim(values) == 0 or problem(values) is not None:
            self.not_detection += 1
            return
        objects = read_label(values).objects
        objects = objects[kept(objects)]
        self.images += 1
        self.objects += len(objects)
        if len(objects) in self.per_image or len(self.per_image) < MAX_CLASSES:
            self.per_image[len(objects)] += 1
        for cls, n in Counter(objects[:, 0].tolist()).items():
            key = int(cls)
            if key in self.per_class or len(self.per_class) < MAX_CLASSES:
                self.per_class[key] += n
            else:
                self.classes_overflow += n
        if self._sized < SIZE_SAMPLE and len(objects):
            take = objects[: SIZE_SAMPLE - self._sized]
            self._sizes.append(np.stack([take[:, 3] - take[:, 1], take[:, 4] - take[:, 2]], 1))
            self._sized += len(take)

    @property
    def is_detection(self) -> bool:
        """Whether the records hold detection labels: most do (those that do
        not are counted, ``not_detection``, and named by ``rec verify
        --boxes``: a damaged label in a detection rec is not a reason to
        describe it as something else)."""
        return self.images > 0 and self.images >= self.not_detection

    def to_dict(self) -> dict[str, Any]:
        sizes = np.concatenate(self._sizes) if self._sizes else np.empty((0, 2), np.float32)

        def spread(column: np.ndarray) -> list[float] | None:
            if not len(column):
                return None
            low, mid, high = np.quantile(column, [0, 0.5, 1]).tolist()
            return [round(low, 4), round(mid, 4), round(high, 4)]

        counts = sorted(self.per_image)  # (the fewest and most among those counted)
        return {
            "images": self.images,
            # records whose label is not one (damaged, or packed without --pack-label)
            "not_detection": self.not_detection,
            "objects": self.objects,
            "objects_per_image": {
                "min": counts[0] if counts else None,
                "mean": round(self.objects / self.images, 3) if self.images else None,
                "max": counts[-1] if counts else None,
                "images_by_count": {str(k): self.per_image[k] for k in counts},
            },
            "boxes_per_class": {str(k): n for k, n in sorted(self.per_class.items())},
            "boxes_of_other_classes": self.classes_overflow,
            # min, median, max of each box's width and height, as fractions of the image
            "box_width": spread(sizes[:, 0]),
            "box_height": spread(sizes[:, 1]),
            "boxes_sized": int(len(sizes)),
        }
