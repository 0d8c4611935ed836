"""The dataset card (``README.md``) of a Hub dataset folder, and the shards
of a split: the Hub's own layout (``data/{split}-NNNNN-of-NNNNN.parquet``;
the card's YAML declares the features, each split's rows and bytes, and
where each split's files are)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..storage.atomic import write_file

__all__ = ["split_files", "write_card"]

_SHARD = re.compile(r"(?P<split>[A-Za-z0-9][A-Za-z0-9_.-]*)-(\d{5})-of-(\d{5})\.parquet")


def split_files(data: str | os.PathLike[str], split: str) -> list[Path]:
    """The shards of ``split`` in a dataset's ``data`` folder, in order."""
    folder = Path(data)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        m = _SHARD.fullmatch(path.name)
        if m and m.group("split") == split and path.is_file():
            found.append(path)
    return sorted(found)


def write_card(folder: Path) -> None:
    """The dataset card, ``README.md``: its YAML declares the features (of
    the first split's schema), each split's rows and bytes, and where each
    split's files are."""
    import pyarrow.parquet as pq

    splits: dict[str, list[Path]] = {}
    for path in sorted((folder / "data").iterdir()):
        m = _SHARD.fullmatch(path.name)
        if m and path.is_file():
            splits.setdefault(m.group("split"), []).append(path)
    if not splits:
        return
    features: Any = None
    sizes = []
    for split, files in splits.items():
        rows = size = 0
        for path in files:
            meta = pq.read_metadata(path)
            rows += meta.num_rows
            size += os.path.getsize(path)
            if features is None:
                info = json.loads(meta.schema.to_arrow_schema().metadata[b"huggingface"])
                features = info["info"]["features"]
        sizes.append((split, rows, size))
    lines = ["---", "dataset_info:", "  features:"]
    lines += _yaml_features(features, "  ")
    lines.append("  splits:")
    for split, rows, size in sizes:
        lines += [f"  - name: {split}", f"    num_bytes: {size}", f"    num_examples: {rows}"]
    total = sum(s for _, _, s in sizes)
    lines += [f"  download_size: {total}", f"  dataset_size: {total}", "configs:",
              "- config_name: default", "  data_files:"]  # fmt: skip
    for split, _, _ in sizes:
        lines += [f"  - split: {split}", f"    path: data/{split}-*"]
    lines += ["---", "", "Packed from MXNet RecordIO with im2rec (`rec export --to parquet`);",
              "`rec import parquet` makes the `.rec`/`.idx` again, byte for byte.", ""]  # fmt: skip
    write_file(folder / "README.md", "\n".join(lines))


def _yaml_features(features: dict[str, Any], indent: str) -> list[str]:
    out = []
    for name, feature in features.items():
        out.append(f"{indent}- name: {name}")
        kind = feature.get("_type") if isinstance(feature, dict) else None
        if kind == "Image":
            out.append(f"{indent}  dtype: image")
        elif kind == "ClassLabel":
            out += [f"{indent}  dtype:", f"{indent}    class_label:", f"{indent}      names:"]
            out += [
                f"{indent}        '{i}': {json.dumps(n)}" for i, n in enumerate(feature["names"])
            ]
        elif kind == "List":
            out.append(f"{indent}  list: {feature['feature']['dtype']}")
        elif kind == "Value":
            out.append(f"{indent}  dtype: {feature['dtype']}")
        else:  # a struct of values
            out.append(f"{indent}  struct:")
            out += _yaml_features(feature, indent + "  ")
    return out
