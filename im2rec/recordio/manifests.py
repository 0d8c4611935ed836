"""The JSON files that describe finished outputs, typed, and read and
written here alone (their fields: docs/format.md, "im2rec's own files").

- ``NAME.pack.json`` (:class:`PackManifest`): what ``rec pack`` made a
  ``.rec``/``.idx`` from (the list's SHA-256, the image root, the options),
  its counts and the two files' sizes and SHA-256s. Written last, so it
  exists only beside a finished output. ``rec verify --manifest`` checks the
  hashes; ``rec pack`` reads it to skip finished work and to refuse to
  replace a dataset packed otherwise.
- ``NAME.shards.json`` (:class:`ShardManifest`): the shards of a sharded
  pack, in order, with their counts.

Each file carries ``format``, the version of its layout. A reader accepts
its own version and older ones (files of im2rec 0.1 have no ``format``:
version 1), and refuses newer ones with a message that says so, rather than
misreading them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict, TypeVar

from ..errors import ManifestError

__all__ = [
    "PACK_FORMAT",
    "SHARDS_FORMAT",
    "FileSums",
    "ListSum",
    "MadeWith",
    "PackManifest",
    "ShardEntry",
    "ShardManifest",
    "checked_field",
    "dump",
    "load_pack_manifest",
    "load_shard_manifest",
    "made_with",
]

PACK_FORMAT = 1
SHARDS_FORMAT = 1


class MadeWith(TypedDict):
    """What an output is made from; two runs with equal ``MadeWith`` make
    the same bytes (packing is deterministic). Also the resume state of a
    partial output (``NAME.rec.partial.json``, :mod:`im2rec.packing.resuming`)."""

    list_sha256: str
    root: str
    options: dict[str, Any]  # PackOptions.as_state(): option name -> JSON value


class ListSum(TypedDict):
    path: str  # the list's file name
    sha256: str
    entries: int


class FileSums(TypedDict):
    path: str  # the file's name, beside the manifest
    bytes: int
    sha256: str


class _PackManifest(TypedDict):
    format: int
    im2rec: str  # the version that wrote it
    list: ListSum
    root: str
    options: dict[str, Any]
    records: int
    failures: dict[str, int]  # reason -> images that failed for it
    rec: FileSums
    idx: FileSums
    seconds: float
    resumed_from: int


class PackManifest(_PackManifest, total=False):
    layout: str  # "insightface"; absent for the plain layout
    identities: int  # the face layout's identity count


class ShardEntry(TypedDict):
    rec: str
    idx: str
    entries: int
    records: int
    bytes: int
    failures: dict[str, int]


class ShardManifest(TypedDict):
    format: int
    list: str
    shards: list[ShardEntry]
    written: str  # local time, ISO 8601 without a zone


def dump(manifest: PackManifest | ShardManifest) -> str:
    """The file's text: indented, one key a line, a final newline."""
    return json.dumps(manifest, indent=1) + "\n"


def made_with(manifest: PackManifest) -> MadeWith:
    return {"list_sha256": manifest["list"]["sha256"], "root": manifest["root"],
            "options": manifest["options"]}  # fmt: skip


T = TypeVar("T")


def checked_field(data: Mapping[str, Any], key: str, kind: type[T], where: str) -> T:
    """``data[key]`` if it is a ``kind``, else a ManifestError naming the
    key: the one check every JSON file im2rec reads back goes through."""
    value = data.get(key)
    # bool is an int to isinstance; no count or size is a bool
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ManifestError(f"{where}: {key!r} is missing or not {kind.__name__}")
    return value


def _format(data: object, where: str, newest: int) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: not a JSON object")
    version = data.get("format", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ManifestError(f"{where}: 'format' is {version!r}, not a version number")
    if version > newest:
        raise ManifestError(
            f"{where}: written by a newer im2rec (format {version}; this one reads up to "
            f"{newest}); upgrade im2rec to use it"
        )
    return data


def _sums(data: Mapping[str, Any], key: str, where: str) -> FileSums:
    part = checked_field(data, key, dict, where)
    return {"path": checked_field(part, "path", str, f"{where} {key}"),
            "bytes": checked_field(part, "bytes", int, f"{where} {key}"),
            "sha256": checked_field(part, "sha256", str, f"{where} {key}")}  # fmt: skip


def _counts(data: Mapping[str, Any], key: str, where: str) -> dict[str, int]:
    part = checked_field(data, key, dict, where)
    for reason in part:
        checked_field(part, reason, int, f"{where} {key}")
    return dict(part)


def load_pack_manifest(data: object, where: str) -> PackManifest:
    """``data`` (parsed JSON) as a pack manifest, every field checked:
    :class:`~im2rec.errors.ManifestError` (a ``ValueError``) names the first
    that is missing or of the wrong kind."""
    found = _format(data, where, PACK_FORMAT)
    listed = checked_field(found, "list", dict, where)
    seconds = found.get("seconds", 0.0)
    manifest: PackManifest = {
        "format": PACK_FORMAT,
        "im2rec": str(found.get("im2rec", "")),
        "list": {"path": checked_field(listed, "path", str, f"{where} list"),
                 "sha256": checked_field(listed, "sha256", str, f"{where} list"),
                 "entries": checked_field(listed, "entries", int, f"{where} list")},
        "root": checked_field(found, "root", str, where),
        "options": checked_field(found, "options", dict, where),
        "records": checked_field(found, "records", int, where),
        "failures": _counts(found, "failures", where),
        "rec": _sums(found, "rec", where),
        "idx": _sums(found, "idx", where),
        "seconds": float(seconds) if isinstance(seconds, (int, float)) else 0.0,
        "resumed_from": int(found.get("resumed_from", 0) or 0),
    }  # fmt: skip
    if "layout" in found:
        manifest["layout"] = checked_field(found, "layout", str, where)
    if "identities" in found:
        manifest["identities"] = checked_field(found, "identities", int, where)
    return manifest


def load_shard_manifest(data: object, where: str) -> ShardManifest:
    """``data`` (parsed JSON) as a shard manifest, every field checked."""
    found = _format(data, where, SHARDS_FORMAT)
    shards: list[ShardEntry] = []
    for i, shard in enumerate(checked_field(found, "shards", list, where)):
        at = f"{where} shard {i}"
        if not isinstance(shard, dict):
            raise ManifestError(f"{at}: not a JSON object")
        shards.append({"rec": checked_field(shard, "rec", str, at),
                       "idx": checked_field(shard, "idx", str, at),
                       "entries": checked_field(shard, "entries", int, at),
                       "records": checked_field(shard, "records", int, at),
                       "bytes": checked_field(shard, "bytes", int, at),
                       "failures": _counts(shard, "failures", at)})  # fmt: skip
    return {"format": SHARDS_FORMAT, "list": checked_field(found, "list", str, where),
            "shards": shards, "written": str(found.get("written", ""))}  # fmt: skip
