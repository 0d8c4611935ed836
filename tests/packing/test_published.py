"""Shards whose outputs go to a store: each published beside the list with
its manifest, counted as finished only while its objects are the ones that
manifest describes, and never replaced when made from something else.
Against a real S3-compatible server (moto's, see :mod:`tests.s3server`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from im2rec.errors import DatasetError
from im2rec.listing.lstfile import read_lst
from im2rec.packing import PackOptions
from im2rec.packing.published import check_shards_replaceable, published_manifest
from im2rec.packing.shards import ShardSpec, pack_shard, shard_specs

from ..conftest import photo_folder, write_lst
from ..s3server import BUCKET

# (a server: `make test-fast` leaves these out)
pytestmark = pytest.mark.slow
pytest.importorskip("s3fs")


def specs_for(tmp_path: Path, prefix: str, options: PackOptions) -> list[ShardSpec]:
    names = photo_folder(tmp_path / "ph", 12, lambda i: (30 + i, 20 + i), "p{i:02d}.jpg")
    lst = write_lst(tmp_path / "ph.lst", names)
    return shard_specs(
        lst, read_lst(lst), 2, options, str(tmp_path / "ph"), f"s3://{BUCKET}/{prefix}"
    )


def test_a_published_shard_is_finished_while_its_objects_are_its_own(
    s3: Any, tmp_path: Path
) -> None:
    specs = specs_for(tmp_path, "pub", PackOptions(pass_through=True))
    for spec in specs:
        assert published_manifest(spec) is None  # (nothing there yet)
        pack_shard(spec)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="pub/")["Contents"])
    assert keys == [f"pub/ph-0000{i}-of-00002.{kind}" for i in range(2)
                    for kind in ("idx", "pack.json", "rec")]  # fmt: skip
    manifest = published_manifest(specs[0])
    assert manifest is not None and manifest["records"] == 6
    s3.put_object(Bucket=BUCKET, Key="pub/ph-00000-of-00002.rec", Body=b"shorter")
    assert published_manifest(specs[0]) is None  # another object than the manifest's
    other = dataclasses.replace(specs[1], root=str(tmp_path / "elsewhere"))
    assert published_manifest(other) is None  # made from another root


def test_shards_made_with_other_options_are_not_replaced(s3: Any, tmp_path: Path) -> None:
    specs = specs_for(tmp_path, "opts", PackOptions(pass_through=True))
    for spec in specs:
        pack_shard(spec)
    check_shards_replaceable(specs, "ph.lst")  # the same command may run again
    resized = [dataclasses.replace(s, options=PackOptions(resize=16)) for s in specs]
    with pytest.raises(DatasetError, match="ph-00000-of-00002.rec: already packed with"):
        check_shards_replaceable(resized, "ph.lst")
