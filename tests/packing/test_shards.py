"""Cutting a list into shards: contiguous, balanced slices."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.errors import ConfigError
from im2rec.listing.lstfile import read_lst
from im2rec.packing.shards import shard_specs

from .test_sharding import RESIZE, listed


def test_shards_are_contiguous_balanced_slices(images: Path, tmp_path: Path) -> None:
    lst = listed(images, tmp_path)
    items = read_lst(lst)
    specs = shard_specs(lst, items, 4, RESIZE, str(images))
    assert [s.entries for s in specs] == [15, 15, 16, 15]
    # (lines numbered within each shard's own list)
    assert [(i.key, i.labels, i.path) for s in specs for i in s.items] == [
        (i.key, i.labels, i.path) for i in items
    ]
    assert [s.stem for s in specs][-1] == "data-00003-of-00004"
    with pytest.raises(ConfigError, match="--shards must be between 1 and the 61 entries"):
        shard_specs(lst, items, 62, RESIZE, str(images))
