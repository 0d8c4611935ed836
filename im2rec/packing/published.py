"""Shards whose outputs go to a store (``rec pack s3://.../train.lst --shards N``).

Each shard is packed in a private local staging folder on whichever machine
runs it (a Dask worker needs no shared file system, only the store) and
published beside the list, manifest last. A shard counts as finished
(``--resume`` skips it) when its manifest in the store was made from this
very slice, root and options and its ``.rec``/``.idx`` have the sizes the
manifest records: objects are written whole, so a size that matches is the
object that was published (re-hashing would download every shard).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..recordio.manifests import PackManifest, load_pack_manifest
from ..storage.objects import publish, read_manifest, remove, size_of
from .resuming import manifest_matches, replaceable

if TYPE_CHECKING:
    from . import PackResult
    from .shards import ShardSpec

__all__ = [
    "check_shards_replaceable",
    "publish_shard",
    "published_manifest",
]


def _url(spec: ShardSpec, suffix: str) -> str:
    return spec.location(suffix)


def publish_shard(spec: ShardSpec, result: PackResult) -> None:
    """Upload a shard packed in a staging folder, its manifest last."""
    pairs = [(result.rec, _url(spec, ".rec")), (result.idx, _url(spec, ".idx"))]
    if result.failure_report is not None:
        pairs.append((result.failure_report, _url(spec, ".failures.tsv")))
    else:
        remove(_url(spec, ".failures.tsv"))
    publish([*pairs, (result.manifest, _url(spec, ".pack.json"))])


def published_manifest(spec: ShardSpec) -> PackManifest | None:
    """The shard's manifest if the store holds it finished (see the module
    doc), else None."""
    url = _url(spec, ".pack.json")
    manifest = read_manifest(url)
    if not manifest:
        return None
    sizes = [size_of(_url(spec, f".{kind}")) for kind in ("rec", "idx")]
    ok = sizes[0] is not None and manifest_matches(manifest, spec.state(), *sizes)
    return load_pack_manifest(manifest, url) if ok else None


def check_shards_replaceable(specs: Sequence[ShardSpec], lst: str) -> None:
    """:func:`~im2rec.packing.resuming.check_replaceable` for each shard in the store."""
    for spec in specs:
        size = size_of(_url(spec, ".rec"))
        if size is not None:
            manifest = read_manifest(_url(spec, ".pack.json"))
            replaceable(_url(spec, ".rec"), size, manifest, spec.state(), lst, "the shards")
