"""The README's library snippets run as printed (with the names they assume
defined first), so the documentation cannot drift from the API."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = """
import io
from PIL import Image
def _jpeg(i):
    out = io.BytesIO()
    Image.new("RGB", (40 + i, 30), (i * 5 % 256, 90, 160)).save(out, "JPEG")
    return out.getvalue()
jpeg_bytes = _jpeg(0)
samples = [(i % 3, _jpeg(i)) for i in range(50)]
"""


def _snippet(first_line: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    found = [b for b in blocks if b.startswith(first_line)]
    assert len(found) == 1, f"README: expected one python block starting {first_line!r}"
    return found[0]


def _run(code: str, cwd: Path) -> str:
    script = cwd / "snippet.py"
    script.write_text(PRELUDE + code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("first_line", "check"),
    [
        (
            "from im2rec import recordio",
            "assert img.shape == (30, 40, 3) and header.label == 3.0\n",
        ),
        (
            "from im2rec.recordio import IndexedRecordWriter",
            "assert len(reader) == 50 and reader.keys[:3] == [0, 1, 2]\n"
            "assert header.id == 42 and jpeg == samples[42][1]\n"
            "assert sum(1 for _ in RecordReader('train.rec')) == 50\n",
        ),
    ],
)
def test_recordio_snippets(tmp_path: Path, first_line: str, check: str) -> None:
    _run(_snippet(first_line) + check, tmp_path)


def test_listing_and_packing_snippet(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    out = _run(_snippet("from im2rec.executors import LocalExecutor"), tmp_path)
    printed = [line.split(" ", 1)[0] for line in out.splitlines()]
    assert sorted(map(int, printed)) == [2, 13]  # 15 images: int(15 * 0.9) train, the rest val
    assert (tmp_path / "example_train.rec").stat().st_size > 0


def _section(title: str, next_title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index(f"\n## {title}\n") : text.index(f"\n## {next_title}\n")]


def test_getting_started_runs_as_printed(tmp_path: Path) -> None:
    """Every block of the newcomer's section, in order, in one folder that
    holds a copy of examples/example: ``sh`` blocks run with bash (any
    failing command fails the test), a ``text`` block starting with ``$ ``
    is a command whose output must be exactly what follows it, ``python``
    blocks run as scripts."""
    pytest.importorskip("torch")
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    blocks = re.findall(
        r"```(sh|text|python)\n(.*?)```", _section("Getting started", "Command reference"), re.S
    )
    assert [lang for lang, _ in blocks].count("sh") >= 4
    printed = []
    for lang, body in blocks:
        if lang == "sh":
            done = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            assert done.returncode == 0, body + done.stdout + done.stderr
        elif lang == "text":
            command, _, expected = body.partition("\n")
            assert command.startswith("$ "), command
            done = subprocess.run(["bash", "-c", command[2:]], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
            assert done.stdout == expected, done.stdout
        else:
            (tmp_path / "snippet.py").write_text(body)
            done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            assert done.returncode == 0, body + done.stderr
        printed.append(done.stdout)
    out = "".join(printed)
    assert "torch.Size([4, 3, 64, 64]) torch.float32" in out  # the DataLoader's batches
    assert "(4, 3, 64, 64)" in out  # ImageRecordIter's
    assert "refused: exit 1" in out  # a finished output made otherwise needs --overwrite
    for name in ("example_train.rec", "example_val.rec", "example_rec.rec", "mydata.rec"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert (tmp_path / "sheet.png").exists()
