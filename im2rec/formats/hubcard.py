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

__all__ = [
    "SHARD",
    "TASKS",
    "Card",
    "DataFolder",
    "ShardInfo",
    "card_text",
    "read_card",
    "size_category",
]

SHARD = re.compile(r"(?P<split>[A-Za-z0-9][A-Za-z0-9_.-]*)-(\d{5})-of-(\d{5})\.parquet")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


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
            m = SHARD.fullmatch(name)
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


#: the Hub's size categories, by the rows of every split together
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
          (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"),
          (1_000_000_000, "100M<n<1B"))  # fmt: skip
#: ``--task``: the Hub's task category and task id
TASKS = {
    "classification": ("image-classification", "multi-class-image-classification"),
    "multi-label": ("image-classification", "multi-label-image-classification"),
    "object-detection": ("object-detection", None),
}
#: the largest card read back (its YAML keeps what the card said of the dataset)
MAX_CARD = 1 << 20
_NOTE = (
    "Packed from MXNet RecordIO with im2rec (`rec export --to parquet`);\n"
    "`rec import parquet` makes a `.rec`/`.idx` from it again.\n"
)


@dataclass(frozen=True)
class Card:
    """What the card says of the dataset beyond its data: each None keeps
    what the card already there said (``rec export`` of another split)."""

    license: str | None = None
    task: str | None = None
    pretty_name: str | None = None
    description: str | None = None


def size_category(rows: int) -> str:
    """The Hub's size category of a dataset of ``rows`` rows."""
    return next((name for top, name in _SIZES if rows < top), "n>1B")


def read_card(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """``(YAML metadata, body)`` of the card at ``path`` (``({}, "")`` if
    there is none); a card that is not one (too large, its YAML unreadable)
    is a DatasetError naming it."""
    import yaml

    try:
        fd = os.open(path, _FLAGS | _NOFOLLOW)
    except FileNotFoundError:
        return {}, ""
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset card ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_CARD + 1)
    if len(data) > MAX_CARD:
        raise DatasetError(f"{path}: a dataset card of more than {MAX_CARD:,} bytes")
    text = data.decode("utf-8", "replace")
    m = re.match(r"---\n(.*?)\n---\n?", text, re.DOTALL)
    if not m:
        return {}, text
    try:
        meta = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as exc:
        raise DatasetError(f"{path}: its YAML header cannot be read ({exc})") from None
    if not isinstance(meta, dict):
        raise DatasetError(f"{path}: its YAML header is not a mapping")
    return meta, text[m.end() :]


def card_text(
    splits: dict[str, list[ShardInfo]], card: Card | None = None, task: str = "classification",
    previous: tuple[dict[str, Any], str] = ({}, ""),
) -> str:  # fmt: skip
    """The card's text: its YAML (written by ``yaml.safe_dump``, which
    quotes every name as YAML needs) holds the license, the task, the size
    category and the pretty name (``card``, else what the ``previous`` card
    said, else the task of the labels, ``task``), and declares the features
    (the first split's, every split's being the same), each split's rows
    and bytes, and where each split's files are; splits in name order. The
    body is ``card.description`` (or the previous card's body)."""
    import yaml

    order = sorted(split for split, infos in splits.items() if infos)
    if not order:
        return ""
    old, body = previous
    card = card or Card()
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
    head: dict[str, Any] = {}
    license_ = card.license if card.license is not None else old.get("license")
    if license_:
        head["license"] = license_
    pretty = card.pretty_name if card.pretty_name is not None else old.get("pretty_name")
    if pretty:
        head["pretty_name"] = pretty
    category, task_id = TASKS[card.task or task]
    if card.task is None and isinstance(old.get("task_categories"), list):
        head["task_categories"] = old["task_categories"]
        if isinstance(old.get("task_ids"), list):
            head["task_ids"] = old["task_ids"]
    else:
        head["task_categories"] = [category]
        if task_id:
            head["task_ids"] = [task_id]
    head["size_categories"] = [size_category(sum(rows for _, rows, _ in sizes))]
    head["dataset_info"] = info
    head["configs"] = [{"config_name": "default", "data_files": files}]
    header = yaml.safe_dump(head, sort_keys=False, allow_unicode=True)
    if card.description is not None:
        body = card.description.strip() + "\n"
    elif not body.strip():
        body = f"# {pretty}\n\n{_NOTE}" if pretty else _NOTE
    return f"---\n{header}---\n\n{body.lstrip()}"


def _yaml_features(features: dict[str, Any]) -> list[dict[str, Any]]:
    """``features`` as the card's YAML lists them (``datasets``' own form)."""
    return [{"name": name, **_yaml_feature(feature)} for name, feature in features.items()]


def _yaml_feature(feature: Any) -> dict[str, Any]:
    kind = feature.get("_type") if isinstance(feature, dict) else None
    if kind == "Image":
        return {"dtype": "image"}
    if kind == "ClassLabel":
        names = {str(i): name for i, name in enumerate(feature["names"])}
        return {"dtype": {"class_label": {"names": names}}}
    if kind == "Value":
        return {"dtype": feature["dtype"]}
    if kind == "List":
        inner = _yaml_feature(feature["feature"])
        listed: dict[str, Any] = {"list": inner["dtype"] if list(inner) == ["dtype"] else inner}
        if feature.get("length") is not None:
            listed["length"] = feature["length"]
        return listed
    return {"struct": _yaml_features(feature)}  # a struct of features
