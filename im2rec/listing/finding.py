"""Finding the ``.lst`` files ``rec pack`` is given (a list, a folder of
lists, or im2rec.py's prefix) and each list's image root, with messages
that say what to run when a folder of images or a ``.rec`` is given
instead of a list."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import MissingFileError
from ..storage.files import read_json
from .records import load_lists_record

__all__ = ["find_lists", "find_root"]


def find_lists(targets: list[str], cwd: str | os.PathLike[str] = ".") -> list[Path]:
    """The ``.lst`` files to pack: each target is a ``.lst`` path, a folder
    holding lists (all of them) or a prefix (every ``PREFIX*.lst``,
    im2rec.py's rule); no target means every list in ``cwd``. Sorted, without
    duplicates."""
    found: dict[Path, None] = {}
    for target in targets or [os.fspath(cwd)]:
        if target.endswith(".lst") and not os.path.isdir(target):
            if not os.path.isfile(target):
                raise MissingFileError(f"{target}: list file not found")
            found[Path(target)] = None
            continue
        if target.endswith((".rec", ".idx")) and not os.path.isdir(target):
            raise MissingFileError(_not_a_list(target))
        matches = _lists_in(target) if os.path.isdir(target) else []
        if not matches:  # a prefix; also for `rec pack example` beside the image folder example/
            prefix = target.rstrip("/" + os.sep) or target  # `example/` as `example`
            matches = _lists_in(os.path.dirname(prefix) or ".", os.path.basename(prefix))
        if not matches:
            where = f"in {target}" if os.path.isdir(target) else f"matching {target}*.lst"
            if os.path.isdir(target) and _holds_images(target):
                name = os.path.basename(os.path.abspath(target))
                raise MissingFileError(
                    f"no .lst files in {target}, which is a folder of images: list it first, "
                    f"`rec list {target} --recursive` (it writes {name}.lst here), then "
                    f"`rec pack {name}.lst`"
                )
            raise MissingFileError(f"no .lst files {where}; make one with `rec list ROOT`")
        found.update(dict.fromkeys(matches))
    return list(found)


def _not_a_list(target: str) -> str:
    """What to say when a .rec or .idx is given where a list goes."""
    stem = target[: -len(".rec")]
    kind = "a record file (what rec pack makes)" if target.endswith(".rec") else "an index"
    if os.path.isfile(stem + ".lst"):
        return f"{target} is {kind}, not a list; to pack its list: `rec pack {stem}.lst`"
    return (
        f"{target} is {kind}, not a list: rec pack reads .lst files (`rec list ROOT` makes "
        f"them); to look inside it: `rec info {stem}.rec`"
    )


def _holds_images(folder: str) -> bool:
    """Whether ``folder`` or one of its subfolders (a look, not a walk) holds
    image files: then the user meant `rec list` before `rec pack`."""
    exts = (".jpg", ".jpeg", ".png")
    try:
        with os.scandir(folder) as it:
            entries = list(it)
        for entry in entries[:1000]:
            if entry.name.lower().endswith(exts):
                return True
            inside = os.listdir(entry.path)[:1000] if entry.is_dir() else []
            if any(n.lower().endswith(exts) for n in inside):
                return True
    except OSError:
        return False
    return False


def _lists_in(folder: str, stem: str = "") -> list[Path]:
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [
        Path(folder, n) for n in names
        if n.startswith(stem) and n.endswith(".lst") and os.path.isfile(os.path.join(folder, n))
    ]  # fmt: skip


def find_root(lst: Path) -> Path:
    """The image root of ``lst``: the root recorded by ``rec list`` in a
    ``*.lists.json`` beside it, else the folder named like the list
    (``example.lst`` -> ``example/``), as im2rec.py users lay things out."""
    folder = lst.parent
    recorded: list[str] = []
    for manifest in sorted(folder.glob("*.lists.json")):
        try:
            record = load_lists_record(read_json(manifest), str(manifest))
        except (OSError, ValueError):
            continue
        names = {os.path.basename(item["path"]) for item in record["lists"]}
        root = record["root"]
        if lst.name in names and root:
            if os.path.isdir(root):
                return Path(root)
            recorded.append(f"{manifest.name} records {root}, which does not exist")
    named = folder / lst.stem
    if named.is_dir():
        return named
    reasons = "; ".join([*recorded, f"{named} is not a folder"])
    raise MissingFileError(f"{lst}: cannot find its image root ({reasons}); pass --root DIR")
