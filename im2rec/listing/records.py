"""``PREFIX.lists.json``: the run record ``rec list`` writes last, typed, and
read and written here alone (docs/format.md, "im2rec's own files").

It says which lists a run wrote (so that the next run removes only its own
stale ones), the image root they are relative to (so that ``rec pack``
finds the images of a list without ``--root``), the classes and the options.
``format`` is the version of its layout; files of im2rec 0.1 have none
(version 1); newer versions are refused rather than misread.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from ..errors import ManifestError
from ..recordio.manifests import checked_field

__all__ = ["LISTS_FORMAT", "ClassEntry", "ListEntry", "ListsRecord", "dump", "load_lists_record"]

LISTS_FORMAT = 1


class ClassEntry(TypedDict):
    label: int
    folder: str  # the class folder, relative to the root
    images: int


class ListEntry(TypedDict):
    path: str  # as given to rec list (PREFIX + suffix + .lst)
    images: int


class ListsRecord(TypedDict):
    format: int
    root: str  # absolute, or a URL ("" in a record that does not say)
    images: int
    classes: list[ClassEntry]
    lists: list[ListEntry]
    skipped: dict[str, int]  # reason -> names skipped for it
    class_map: str
    manifest: str  # this file's own path
    skipped_report: str | None
    options: dict[str, Any]  # ListOptions, as JSON values


def dump(record: ListsRecord) -> str:
    return json.dumps(record, indent=1) + "\n"


def load_lists_record(data: object, where: str) -> ListsRecord:
    """``data`` (parsed JSON) as a run record, the fields readers use checked:
    :class:`~im2rec.errors.ManifestError` (a ``ValueError``) otherwise."""
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: not a JSON object")
    version = data.get("format", 1)
    if version != LISTS_FORMAT:
        raise ManifestError(
            f"{where}: format {version!r}; this im2rec reads format {LISTS_FORMAT} "
            "(written by a newer im2rec? upgrade it)"
        )
    lists: list[ListEntry] = []
    for i, item in enumerate(checked_field(data, "lists", list, where)):
        if not isinstance(item, dict):
            raise ManifestError(f"{where}: list {i} is not a JSON object")
        lists.append({"path": checked_field(item, "path", str, f"{where} list {i}"),
                      "images": int(item.get("images") or 0)})  # fmt: skip
    report = data.get("skipped_report")
    if report is not None and not isinstance(report, str):
        raise ManifestError(f"{where}: 'skipped_report' is not a path")
    root = data.get("root")  # (needed to find images, not to clean up: may be absent)
    classes = data.get("classes")
    skipped = data.get("skipped")
    options = data.get("options")
    return {
        "format": LISTS_FORMAT,
        "root": root if isinstance(root, str) else "",
        "images": int(data.get("images") or 0),
        "classes": classes if isinstance(classes, list) else [],
        "lists": lists,
        "skipped": skipped if isinstance(skipped, dict) else {},
        "class_map": str(data.get("class_map") or ""),
        "manifest": str(data.get("manifest") or where),
        "skipped_report": report,
        "options": options if isinstance(options, dict) else {},
    }
