"""The record of a listing (NAME.lists.json): it loads back as written, any
JSON loads or is a manifest error, and a newer one is not trusted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from im2rec.errors import ManifestError
from im2rec.listing import ListOptions, make_lists
from im2rec.listing.finding import find_root
from im2rec.listing.records import LISTS_FORMAT, load_lists_record
from im2rec.recordio.manifests import (
    load_pack_manifest,
    load_shard_manifest,
)

from ..conftest import photo_folder


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=4),
                    max_leaves=12))  # fmt: skip
def test_any_json_loads_or_is_a_manifest_error(data: Any) -> None:
    for load in (load_pack_manifest, load_shard_manifest, load_lists_record):
        try:
            load(data, "f")
        except ManifestError:
            pass


def test_the_lists_record_loads_back_and_a_newer_one_is_not_trusted(tmp_path: Path) -> None:
    names = photo_folder(tmp_path / "data" / "a", 3, lambda i: (40, 30), "{i}.jpg")
    assert names
    out = tmp_path / "lists"
    out.mkdir()
    make_lists(tmp_path / "data", out / "train", ListOptions(recursive=True))
    path = out / "train.lists.json"
    raw = json.loads(path.read_text())
    assert raw["format"] == LISTS_FORMAT and load_lists_record(raw, "r") == raw
    assert find_root(out / "train.lst") == tmp_path / "data"
    raw["format"] = LISTS_FORMAT + 1
    path.write_text(json.dumps(raw))
    with pytest.raises(Exception, match="cannot find its image root"):
        find_root(out / "train.lst")  # a record this version cannot read is not guessed at
