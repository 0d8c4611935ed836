"""A Hub dataset folder's ``data`` folder and its card (``README.md``): the
Hub's own layout (``data/{split}-NNNNN-of-NNNNN.parquet``; the card's YAML
declares the features, each split's rows and bytes, and where each split's
files are).

:class:`DataFolder` is how ``rec export --to parquet`` writes there: through
a descriptor of ``data`` opened without following a link, so nothing is
written, renamed or removed through a link planted at ``data`` or at a
shard's name, and every shard already there is read (and must be a shard of
the same features) before anything is published."""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DatasetError, OutputError
from ..storage.atomic import create_output

__all__ = ["DataFolder", "ShardInfo", "card_text", "split_files", "split_names"]

_SHARD = re.compile(r"(?P<split>[A-Za-z0-9][A-Za-z0-9_.-]*)-(\d{5})-of-(\d{5})\.parquet")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def split_files(data: str | os.PathLike[str], split: str) -> list[Path]:
    """The shards of ``split`` in a dataset's ``data`` folder, in order (to
    read: a Hub snapshot's shards are links into its blob store)."""
    folder = Path(data)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        m = _SHARD.fullmatch(path.name)
        if m and m.group("split") == split and path.is_file():
            found.append(path)
    return sorted(found)


def split_names(data: str | os.PathLike[str]) -> list[str]:
    """The splits whose shards are in a dataset's ``data`` folder, sorted."""
    folder = Path(data)
    if not folder.is_dir():
        return []
    return sorted({m.group("split") for p in folder.iterdir() if (m := _SHARD.fullmatch(p.name))})


@dataclass(frozen=True)
class ShardInfo:
    """What the card says of a shard: its rows, bytes and features."""

    name: str
    rows: int
    size: int
    features: dict[str, Any]


class DataFolder:
    """``FOLDER/data``, made if missing, opened as a folder itself (a link
    there is refused, :class:`OutputError`); every name below it is reached
    through that descriptor, never through a link."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "data"
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(self.path)
        except FileExistsError:
            pass
        try:
            self.fd = os.open(self.path, _FLAGS | _DIRECTORY | _NOFOLLOW)
        except OSError as exc:
            raise OutputError(
                f"{self.path}: a symlink or a file is where the dataset's data folder belongs "
                f"({exc.strerror}); im2rec does not write through links: remove it, or export "
                "to another folder"
            ) from None

    def shards(self) -> dict[str, list[str]]:
        """Every shard's name, by split, in order; a shard's name that is not
        a regular file (a link, a folder) is refused, naming it."""
        found: dict[str, list[str]] = {}
        for name in sorted(os.listdir(self.fd)):
            m = _SHARD.fullmatch(name)
            if not m:
                continue
            info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                kind = "symlink" if stat.S_ISLNK(info.st_mode) else "folder or device"
                raise OutputError(
                    f"{self.path / name}: a {kind} where a shard belongs; im2rec neither reads "
                    "nor replaces shards through links: remove it, or export to another folder"
                )
            found.setdefault(m.group("split"), []).append(name)
        return found

    def info(self, name: str) -> ShardInfo:
        """The shard ``name``'s rows, size and features; DatasetError naming
        it when it is not a Parquet file with a dataset's features."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        fd = os.open(name, _FLAGS | _NOFOLLOW, dir_fd=self.fd)
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(fd).st_size
            try:
                meta = pq.read_metadata(f)
                features = json.loads(meta.schema.to_arrow_schema().metadata[b"huggingface"])
                features = features["info"]["features"]
                if not isinstance(features, dict):
                    raise TypeError("features are not a mapping")
            except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as exc:
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise DatasetError(
                    f"{self.path / name}: not a shard of a dataset (pyarrow: {why}); nothing "
                    "was written: remove it, or export to another folder"
                ) from None
        return ShardInfo(name, meta.num_rows, size, features)

    def create(self, name: str) -> int:
        return create_output(name, dir_fd=self.fd)

    def replace(self, name: str, final: str) -> None:
        os.replace(name, final, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        os.close(self.fd)


def card_text(splits: dict[str, list[ShardInfo]]) -> str:
    """The card's text: its YAML (written by ``yaml.safe_dump``, which
    quotes every name as YAML needs) declares the features (the first
    split's, every split's being the same), each split's rows and bytes,
    and where each split's files are; splits in name order."""
    import yaml

    order = sorted(split for split, infos in splits.items() if infos)
    if not order:
        return ""
    features = splits[order[0]][0].features
    sizes = [(split, sum(i.rows for i in splits[split]), sum(i.size for i in splits[split]))
             for split in order]  # fmt: skip
    total = sum(s for _, _, s in sizes)
    info = {
        "features": _yaml_features(features),
        "splits": [{"name": split, "num_bytes": size, "num_examples": rows}
                   for split, rows, size in sizes],
        "download_size": total,
        "dataset_size": total,
    }  # fmt: skip
    files = [{"split": split, "path": f"data/{split}-*"} for split, _, _ in sizes]
    configs = [{"config_name": "default", "data_files": files}]
    header = yaml.safe_dump(
        {"dataset_info": info, "configs": configs}, sort_keys=False, allow_unicode=True
    )
    return (
        f"---\n{header}---\n\nPacked from MXNet RecordIO with im2rec (`rec export --to parquet`);\n"
        "`rec import parquet` makes the `.rec`/`.idx` again, byte for byte.\n"
    )


def _yaml_features(features: dict[str, Any]) -> list[dict[str, Any]]:
    """``features`` as the card's YAML lists them (``datasets``' own form)."""
    out: list[dict[str, Any]] = []
    for name, feature in features.items():
        kind = feature.get("_type") if isinstance(feature, dict) else None
        if kind == "Image":
            out.append({"name": name, "dtype": "image"})
        elif kind == "ClassLabel":
            names = {str(i): n for i, n in enumerate(feature["names"])}
            out.append({"name": name, "dtype": {"class_label": {"names": names}}})
        elif kind == "List":
            out.append({"name": name, "list": feature["feature"]["dtype"]})
        elif kind == "Value":
            out.append({"name": name, "dtype": feature["dtype"]})
        else:  # a struct of values
            out.append({"name": name, "struct": _yaml_features(feature)})
    return out
