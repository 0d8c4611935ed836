"""Pre-split folders (train/, val/, test/) listed with one class map, a
class order given for folders, and splits whose maps disagree refused
where they are packed and read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from im2rec.listing.classmap import disagreeing_map, read_class_map
from im2rec.listing.lstfile import read_lst

SPLITS = {
    "train": ["blank", "circle", "square", "triangle"],
    "val": ["blank", "square", "triangle"],
}


def rec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """data/train/{4 classes} and data/val/{3 of them}: the usual layout."""
    for split, classes in SPLITS.items():
        for c, name in enumerate(classes):
            folder = tmp_path / "data" / split / name
            folder.mkdir(parents=True)
            for i in range(2):
                Image.new("RGB", (8, 8), (40 * c, 10 * i, 0)).save(folder / f"{i}.jpg")
    return tmp_path


def labels_by_class(lst: Path) -> dict[str, int]:
    return {Path(item.path).parent.name: int(item.labels[0]) for item in read_lst(lst)}


def test_a_pre_split_root_is_listed_split_by_split_with_one_class_map(data: Path) -> None:
    done = rec("list", "data", "--recursive", "-o", "ds", cwd=data)
    assert done.returncode == 0, done.stderr
    assert "The folders train/, val/ are splits" in done.stdout
    assert list(read_class_map(data / "ds.classes.tsv").values()) == SPLITS["train"]
    train, val = labels_by_class(data / "ds_train.lst"), labels_by_class(data / "ds_val.lst")
    assert train == {"blank": 0, "circle": 1, "square": 2, "triangle": 3}
    assert val == {"blank": 0, "square": 2, "triangle": 3}  # (square was 1: another class)
    assert all(item.path.startswith("val/") for item in read_lst(data / "ds_val.lst"))
    record = json.loads((data / "ds.lists.json").read_text())
    assert [entry["path"] for entry in record["lists"]] == ["ds_train.lst", "ds_val.lst"]
    done = rec("pack", "ds", "--pass-through", "-q", cwd=data)  # the root from the run record
    assert done.returncode == 0, done.stderr
    from im2rec.training import RecordDataset

    ds = RecordDataset(data / "ds_val.rec")
    assert ds.classes == SPLITS["train"] and sorted({ds[i][1] for i in range(len(ds))}) == [0, 2, 3]


def test_options_that_cut_a_list_are_refused_for_split_folders(data: Path) -> None:
    done = rec("list", "data", "--recursive", "--train-ratio", "0.8", cwd=data)
    assert done.returncode == 2 and "its splits already" in done.stderr
    assert "--no-splits" in done.stderr
    done = rec("list", "data", "--recursive", "--no-splits", "-o", "tree", "-q", cwd=data)
    assert done.returncode == 0, done.stderr
    assert list(read_class_map(data / "tree.classes.tsv").values())[:2] == [
        "train/blank", "train/circle"
    ]  # fmt: skip
    (data / "data" / "validation" / "x").mkdir(parents=True)
    done = rec("list", "data", "--recursive", cwd=data)
    assert done.returncode == 2 and "val/ and validation/ are both val splits" in done.stderr


def test_a_split_listed_alone_takes_its_siblings_classes(data: Path) -> None:
    assert rec("list", "data/train", "--recursive", "-o", "train", "-q", cwd=data).returncode == 0
    done = rec("list", "data/val", "--recursive", "-o", "val", "--classes", "train.classes.tsv",
               "-q", cwd=data)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert labels_by_class(data / "val.lst") == {"blank": 0, "square": 2, "triangle": 3}
    assert disagreeing_map(data / "val.classes.tsv") is None
    (data / "names.txt").write_text("triangle\nsquare\n")  # (a name a line, too)
    done = rec("list", "data/val", "--recursive", "-o", "v2", "--classes", "names.txt", cwd=data)
    assert done.returncode == 1 and "['blank'] are not among the classes given" in done.stderr


def test_splits_whose_class_maps_disagree_are_refused_when_packed_and_read(data: Path) -> None:
    """Listed one after the other: square is 2 in train and 1 in val."""
    for split in ("train", "val"):
        assert (
            rec("list", f"data/{split}", "--recursive", "-o", split, "-q", cwd=data).returncode == 0
        )
    done = rec("pack", "val.lst", "--pass-through", cwd=data)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "val.classes.tsv labels 'square' 1, and train.classes.tsv" in done.stderr
    assert "labels it 2" in done.stderr and "--classes train.classes.tsv" in done.stderr
    assert not (data / "val.rec").exists()
    done = rec("pack", "val.lst", "--pass-through", "--allow-class-mismatch", "-q", cwd=data)
    assert done.returncode == 0, done.stderr
    from im2rec.errors import DatasetError
    from im2rec.training import RecordDataset

    with pytest.raises(DatasetError, match="labels 'square' 1, and .*train.classes.tsv"):
        RecordDataset(data / "val.rec")
    assert RecordDataset(data / "val.rec", class_map=data / "val.classes.tsv").classes == [
        "blank", "square", "triangle"
    ]  # fmt: skip
