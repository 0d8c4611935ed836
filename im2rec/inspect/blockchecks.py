"""``rec verify``'s checks of a block of whole records at once
(:class:`~im2rec.recordio.blocks.Block`): the padding after each record's
data and, with ``--boxes``, each label as a detection label, on arrays.
The words for a record found wrong are those of the per-record checks
(:mod:`im2rec.inspect.verifying`, :func:`~im2rec.inspect.boxes.label_problems`),
called for that record alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..recordio.blocks import Block
from ..recordio.codec import HEAD_SIZE, decode_length, frame_size, holds_labels
from ..recordio.codec import padding_bits as _padding_bits
from ..recordio.detection import check, outside

__all__ = ["bad_paddings", "label_findings"]


def bad_paddings(block: Block, lrec: np.ndarray) -> list[tuple[int, int]]:
    """``(head, where the padding starts)`` of each record of the block
    whose padding is not zeros (file offsets)."""
    bits = _padding_bits(lrec)
    padded = np.flatnonzero(bits)
    if not len(padded):
        return []
    words = np.frombuffer(block.data, "<u4", count=len(block.data) // 4)
    last = (block.heads[padded] + frame_size(lrec[padded]) - 4) >> 2
    bad = padded[(words[last].astype(np.int64) & bits[padded]) != 0]
    heads = block.heads[bad] + block.base
    ends = heads + HEAD_SIZE + decode_length(lrec[bad])
    return list(zip(heads.tolist(), ends.tolist(), strict=True))


def label_findings(block: Block, fields: np.ndarray) -> np.ndarray:
    """Which records of the block ``rec verify --boxes`` names (rising
    positions in the block): those whose header does not read (for the
    per-record check to say why), and those whose label is no detection
    label or has a box outside the image or an empty one."""
    lrec = fields["lrec"].astype(np.int64)
    flag = fields["flag"].astype(np.int64)
    readable = holds_labels(flag, lrec)
    found = ~readable | (flag == 0)
    many, labels = block.labels()  # (those readable with flag > 0)
    if len(many):
        faults, groups = check(labels)
        bad = faults.code != 0
        for group in groups:
            flagged: Any = outside(group.objects, group.low, group.high) | ~group.kept
            bad[group.owner[flagged]] = True
        found[many[bad]] = True
    return np.flatnonzero(found)
