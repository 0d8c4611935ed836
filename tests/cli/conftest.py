"""What the command tests share: a CliRunner call and a folder of photos
in three classes, listed or not."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from im2rec.cli import main

from ..conftest import photo


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for c in range(3):
        folder = tmp_path / "example" / f"class{c}"
        folder.mkdir(parents=True)
        for i in range(6):
            photo(50 + 7 * i, 40 + 5 * c, 10 * c + i).save(folder / f"{i}.jpg", quality=85)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def listed(example: Path) -> Path:
    assert run("list", "./example", "--recursive", "-q")[0] == 0
    return example
