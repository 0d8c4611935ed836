"""The bundled examples run as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_recordio_quickstart(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "recordio_quickstart.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "8 records; first has flag=2" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.idx", "demo.rec"]


def test_bundled_example_images_list_and_pack(tmp_path: Path) -> None:
    """What `make demo` does, checked: 15 images in 3 classes, packed."""
    import json

    from im2rec.listing import ListOptions, make_lists
    from im2rec.packing import PackOptions, pack_list

    make_lists(ROOT / "examples" / "example", tmp_path / "example", ListOptions(recursive=True))
    result = pack_list(tmp_path / "example.lst", PackOptions(pass_through=True, pack_label=True))
    assert result.records == 15 and not result.failures
    assert json.loads(result.manifest.read_text())["records"] == 15


@pytest.mark.slow
def test_train_torch_example_runs_both_apis(tmp_path: Path) -> None:
    """The README's training loops, as examples/train_torch.py runs them."""
    import pytest

    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_torch.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "ImageRecordIter epoch 0",
        "ImageRecordIter epoch 1",
        "RecordDataset epoch 0",
        "RecordDataset epoch 1",
    ]
    assert all(0 < float(line.rsplit(" ", 1)[1]) < 10 for line in lines)
