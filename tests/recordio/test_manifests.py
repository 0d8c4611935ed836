"""The JSON files im2rec writes beside its outputs, as typed structures:
what rec pack, sharded packing and rec list write loads back field for
field; files of 0.1 (no ``format``) still load; a newer format, or a field
missing or of the wrong kind, is a ManifestError that names it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from im2rec.errors import DatasetError, ManifestError
from im2rec.executors import LocalExecutor
from im2rec.packing import PackOptions, pack_list
from im2rec.packing.cluster import LocalRunner
from im2rec.packing.sharding import pack_sharded
from im2rec.recordio.manifests import (
    PACK_FORMAT,
    dump,
    load_pack_manifest,
    load_shard_manifest,
)

from ..conftest import photo_folder, write_lst


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    names = photo_folder(tmp_path / "imgs", 6, lambda i: (40, 30), "{i}.jpg")
    lst = write_lst(tmp_path / "imgs.lst", names)
    pack_list(lst, PackOptions(pass_through=True), root=tmp_path / "imgs")
    return lst


def test_a_pack_manifest_loads_back_as_written(packed: Path) -> None:
    raw = json.loads(packed.with_suffix(".pack.json").read_text())
    manifest = load_pack_manifest(raw, "imgs.pack.json")
    assert raw["format"] == manifest["format"] == PACK_FORMAT
    assert manifest == raw  # every field typed and kept
    assert (
        manifest["records"] == 6
        and manifest["rec"]["bytes"] == packed.with_suffix(".rec").stat().st_size
    )
    assert dump(manifest) == packed.with_suffix(".pack.json").read_text()


def test_a_manifest_of_version_0_1_without_format_still_loads(packed: Path) -> None:
    raw = json.loads(packed.with_suffix(".pack.json").read_text())
    del raw["format"]
    assert load_pack_manifest(raw, "old")["format"] == 1
    packed.with_suffix(".pack.json").write_text(json.dumps(raw))
    again = pack_list(
        packed, PackOptions(pass_through=True), root=packed.parent / "imgs", resume=True
    )
    assert again.already_done  # resume recognises the old file as finished work


def test_a_newer_format_is_refused_by_name(packed: Path) -> None:
    manifest = packed.with_suffix(".pack.json")
    raw = json.loads(manifest.read_text())
    raw["format"] = PACK_FORMAT + 1
    with pytest.raises(ManifestError, match=r"written by a newer im2rec \(format 2"):
        load_pack_manifest(raw, "x")
    manifest.write_text(json.dumps(raw))
    with pytest.raises(DatasetError, match="newer im2rec.*pass --overwrite"):
        pack_list(
            packed, PackOptions(pass_through=True), root=packed.parent / "imgs", overwrite=False
        )


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [(("records",), "6", "'records'"), (("rec", "sha256"), None, "'sha256'"),
     (("list", "entries"), True, "'entries'"), (("failures",), {"missing": "2"}, "'missing'"),
     (("root",), 7, "'root'"), (("idx",), [], "'idx'")],
)  # fmt: skip
def test_each_field_is_checked(packed: Path, path: tuple[str, ...], value: Any, named: str) -> None:
    raw = json.loads(packed.with_suffix(".pack.json").read_text())
    where = raw
    for key in path[:-1]:
        where = where[key]
    if value is None:
        del where[path[-1]]
    else:
        where[path[-1]] = value
    with pytest.raises(ManifestError, match=named):
        load_pack_manifest(raw, "m")


def test_a_resume_state_of_a_newer_format_is_explained(tmp_path: Path, packed: Path) -> None:
    state = tmp_path / "imgs.rec.partial.json"
    state.write_text(json.dumps({"format": 9, "list_sha256": "x", "root": "/", "options": {}}))
    (tmp_path / "imgs.rec.partial").write_bytes(b"")
    (tmp_path / "imgs.idx.partial").write_bytes(b"")
    with pytest.raises(DatasetError, match=r"another version of im2rec \(state format 9\)"):
        pack_list(packed, PackOptions(pass_through=True), root=tmp_path / "imgs", resume=True,
                  overwrite=True)  # fmt: skip


def test_a_shard_manifest_loads_back(tmp_path: Path) -> None:
    names = photo_folder(tmp_path / "imgs", 8, lambda i: (40, 30), "{i}.jpg")
    lst = write_lst(tmp_path / "imgs.lst", names)
    with LocalExecutor(1) as pool:
        pack_sharded(lst, PackOptions(pass_through=True), shards=2, runner=LocalRunner(pool),
                     root=tmp_path / "imgs")  # fmt: skip
    path = next(tmp_path.glob("*.shards.json"))
    raw = json.loads(path.read_text())
    manifest = load_shard_manifest(raw, path.name)
    assert manifest == raw and [s["entries"] for s in manifest["shards"]] == [4, 4]
