"""Where a split's Parquet files are in a dataset folder, for ``rec import
parquet``: the folder ``rec export --to parquet`` writes, a dataset
repository as ``hf download`` or ``huggingface_hub``'s snapshot folders
hold it (its files links into a blob store), and the Hub's Parquet
conversion (``CONFIG/SPLIT/0000.parquet``).

The card's ``configs`` say where each split's files are (``data_files``,
as ``datasets`` reads them); without them the Hub's naming conventions
decide (``data/SPLIT-00000-of-00001.parquet``, ``CONFIG/SPLIT-*.parquet``,
``CONFIG/SPLIT/*.parquet``, ``SPLIT.parquet``...), as they do for
``datasets``."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

from ..errors import MissingFileError
from ..storage.confined import relative_name
from .hubcard import SHARD, read_card

__all__ = ["dataset_files", "split_files", "split_names"]

#: the Hub's naming conventions for a split's Parquet files, in the order tried
_CONVENTIONS = (
    "data/{split}-*.parquet", "{split}-*.parquet", "*/{split}-*.parquet", "data/{split}.parquet",
    "{split}.parquet", "*/{split}.parquet", "{split}/*.parquet", "*/{split}/*.parquet",
)  # fmt: skip


def split_files(data: str | os.PathLike[str], split: str) -> list[Path]:
    """The shards of ``split`` in a dataset's ``data`` folder, in order (to
    read: a Hub snapshot's shards are links into its blob store)."""
    folder = Path(data)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        m = SHARD.fullmatch(path.name)
        if m and m.group("split") == split and path.is_file():
            found.append(path)
    return sorted(found)


def split_names(data: str | os.PathLike[str]) -> list[str]:
    """The splits whose shards are in a dataset's ``data`` folder, sorted."""
    folder = Path(data)
    if not folder.is_dir():
        return []
    return sorted({m.group("split") for p in folder.iterdir() if (m := SHARD.fullmatch(p.name))})


def _glob(folder: Path, pattern: str, split: str | None, where: str) -> list[Path]:
    """Parquet files under ``folder`` matching ``pattern`` (relative; one
    that climbs out is refused), sorted; a shard named for another split
    (``train-extra-00000-of-00001.parquet`` under ``train-*``) left out."""
    pattern = relative_name(pattern, f"{where}: its card's data files")
    found = []
    for name in glob.glob(pattern, root_dir=folder):
        path = folder / name
        m = SHARD.fullmatch(path.name)
        if (
            path.suffix == ".parquet"
            and path.is_file()
            and (split is None or m is None or m.group("split") == split)
        ):
            found.append(path)
    return sorted(found)


def _config(meta: dict[str, Any], config: str | None, where: str) -> dict[str, Any] | None:
    configs = meta.get("configs")
    if not isinstance(configs, list) or not configs:
        if config is not None:
            raise MissingFileError(f"{where}: its card declares no configs (--config {config})")
        return None
    named = {c.get("config_name"): c for c in configs if isinstance(c, dict)}
    if config is not None:
        if config not in named:
            raise MissingFileError(
                f"{where}: no config {config!r}; its configs: {', '.join(map(str, named))}"
            )
        return named[config]
    default = next((c for c in named.values() if c.get("default")), None)
    return default or named.get("default") or next(iter(named.values()), None)


def _entries(config: dict[str, Any]) -> dict[str, list[str]]:
    """A config's ``data_files`` as ``{split: [patterns]}`` (a bare pattern
    or list is the train split, as ``datasets`` reads it)."""
    files = config.get("data_files")
    if isinstance(files, str):
        return {"train": [files]}
    out: dict[str, list[str]] = {}
    for entry in files if isinstance(files, list) else []:
        if isinstance(entry, str):
            out.setdefault("train", []).append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("split"), str):
            paths = entry.get("path")
            paths = [paths] if isinstance(paths, str) else paths
            out.setdefault(entry["split"], []).extend(p for p in paths or [] if isinstance(p, str))
    return out


def dataset_files(
    folder: str | os.PathLike[str], split: str, config: str | None = None
) -> list[Path]:
    """The Parquet files of ``split`` in the dataset folder ``folder``, in
    order (MissingFileError naming the splits there when it has none)."""
    root = Path(folder)
    where = os.fspath(folder)
    chosen = _config(read_card(root / "README.md")[0], config, where)
    if chosen is not None:
        entries = _entries(chosen)
        patterns = entries.get(split, [])
        found = [p for pattern in patterns for p in _glob(root, pattern, split, where)]
        if found:
            return sorted(set(found))
        splits = ", ".join(sorted(entries)) or "none"
        raise MissingFileError(
            f"{where}: no Parquet files of split {split!r} in config "
            f"{chosen.get('config_name')!r}; its splits: {splits} (--split)"
        )
    for pattern in _CONVENTIONS:
        found = _glob(root, pattern.format(split=glob.escape(split)), split, where)
        if found:
            return found
    there = split_names(root / "data")
    said = f"its splits: {', '.join(there)}" if there else "it holds no shards named for a split"
    raise MissingFileError(f"{where}: no data/{split}-*.parquet shards in it; {said} (--split)")
