"""Packing a list that lives in a store: ``rec pack s3://bucket/lists/train.lst``.

The list is fetched into the local spool (see :mod:`.objects`) and packed
there exactly as a local list is (so ``--resume`` continues an interrupted
run from the spool, byte-identical), then the outputs are published beside
the list in the store: ``.rec``, ``.idx``, the failure report, and the
manifest last. The images may be local or in the store (a URL root).

Before any work, the store's own outputs are checked as local ones are: a
finished ``.rec`` made otherwise is not replaced without ``overwrite``, and
``resume`` finds one made from this very list, root and options done.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import MissingFileError
from ..formats.insightface import settle_property
from ..listing.lstfile import read_lst
from ..listing.records import load_lists_record
from ..recordio.manifests import MadeWith, load_pack_manifest
from ..storage import read_bytes, sibling
from ..storage.atomic import exclusive, write_file
from ..storage.files import parse_json
from ..storage.objects import (
    list_names,
    publish,
    read_manifest,
    remove,
    size_of,
    spool_for,
    url_join,
)
from .layouts import check_interrupted, pack_files
from .outcome import PackResult, result_from_manifest
from .pipeline import PackRun, run_state
from .resuming import PartialFiles, manifest_matches, replaceable

__all__ = ["find_remote_lists", "find_remote_root", "pack_remote", "spooled_list"]

_OUTPUTS = {"rec": ".rec", "idx": ".idx", "report": ".failures.tsv", "manifest": ".pack.json"}


@contextlib.contextmanager
def spooled_list(url: str) -> Iterator[tuple[Path, Callable[[], str]]]:
    """The list at ``url`` fetched into its spool folder, which is held
    locked for the block: ``(local copy, a function finding its image root)``.
    The spool folder goes when the block succeeds (a failure keeps what an
    interrupted pack left there for ``--resume``)."""
    spool = spool_for(url)
    with exclusive(spool, "packing into"):
        local = spool / url.rsplit("/", 1)[-1]
        text = read_bytes(url)
        if not local.exists() or local.read_bytes() != text:
            write_file(local, text)
        yield local, lambda: find_remote_root(url)
    shutil.rmtree(spool, ignore_errors=True)


def pack_remote(lst: str, run: PackRun) -> PackResult:
    """Pack the list at the URL ``lst`` (see the module doc)."""
    with spooled_list(lst) as (local, root_found):
        files = PartialFiles(local)
        urls = {kind: sibling(lst, suffix) for kind, suffix in _OUTPUTS.items()}
        urls["lst"] = lst
        root = run.root if run.root is not None else root_found()
        state = run_state(files, run.options, root)
        manifest = read_manifest(urls["manifest"])
        rec_size = size_of(urls["rec"])
        resuming = run.resume and files.state.exists()
        if run.resume and not resuming and _done(manifest, state, rec_size, urls["idx"]):
            finished = load_pack_manifest(manifest, urls["manifest"])
            result = result_from_manifest(files, read_lst(local), finished)
            result.urls = urls
            return result
        check_interrupted(files, run)
        if not run.overwrite and not resuming and rec_size is not None:
            replaceable(urls["rec"], rec_size, manifest, state, local.name)
        result = pack_files(files, dataclasses.replace(run, root=state["root"], overwrite=True))
        report = result.failure_report
        pairs = [(result.rec, urls["rec"]), (result.idx, urls["idx"])]
        if report is not None:
            pairs.append((report, urls["report"]))
        else:
            remove(urls["report"])  # an earlier run's, which no longer holds
            del urls["report"]
        if result.property is not None:  # beside the list, as beside a local one
            url = url_join(lst.rsplit("/", 1)[0], "property")
            text = result.property.read_bytes()
            result.property_note = settle_property(url, text, overwrite=run.overwrite)
            if result.property_note is None:
                pairs.append((result.property, url))
                urls["property"] = url
            else:
                result.property = None
        publish([*pairs, (result.manifest, urls["manifest"])])
        result.urls = urls
        return result


def _done(manifest: object, state: MadeWith, rec_size: int | None, idx: str) -> bool:
    """The store holds the finished output of this very list, root and
    options, at the sizes its manifest records (objects are written whole)."""
    return rec_size is not None and manifest_matches(manifest, state, rec_size, size_of(idx))


def find_remote_root(lst: str) -> str:
    """The image root of a list in a store, by :func:`~im2rec.listing.finding.find_root`'s
    rule: the root ``rec list`` recorded in a ``*.lists.json`` beside it,
    else the prefix named like the list."""
    folder, _, name = lst.rpartition("/")
    names = list_names(folder)
    for record in (n for n in names if n.endswith(".lists.json")):
        try:
            data = parse_json(read_bytes(url_join(folder, record), limit=1 << 24), record)
            found = load_lists_record(data, record)
        except (MissingFileError, ValueError):
            continue
        listed = {os.path.basename(item["path"]) for item in found["lists"]}
        recorded = found["root"]
        if name in listed and recorded:
            return recorded
    stem = name.rsplit(".", 1)[0]
    if stem in names:
        return url_join(folder, stem)
    raise MissingFileError(
        f"{lst}: cannot find its image root (no *.lists.json beside it names it, and there is "
        f"no prefix {url_join(folder, stem)}/); pass --root"
    )


def find_remote_lists(target: str) -> list[str]:
    """:func:`~im2rec.listing.finding.find_lists` for a URL: the list itself, or
    every ``PREFIX*.lst`` for a prefix (im2rec.py's rule), sorted."""
    if target.endswith(".lst"):
        return [target]
    folder, _, stem = target.rstrip("/").rpartition("/")
    if target.endswith("/"):  # a "folder": every list in it
        folder, stem = target.rstrip("/"), ""
    found = [
        url_join(folder, n) for n in list_names(folder) if n.startswith(stem) and n.endswith(".lst")
    ]
    if not found:
        raise MissingFileError(
            f"no .lst objects matching {url_join(folder, stem)}*.lst; make one with "
            "`rec list ROOT -o PREFIX`"
        )
    return found
