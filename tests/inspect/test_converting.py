"""rec unpack / show / merge."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from im2rec.cli import main


def test_cli(dataset: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "unpack",
            str(dataset / "d.rec"),
            str(dataset / "u"),
            "--classes",
            str(dataset / "d.classes.tsv"),
        ],
    )
    assert result.exit_code == 0 and "15 images written" in result.output
    result = runner.invoke(main, ["unpack", str(dataset / "d.rec"), str(dataset / "u")])
    assert result.exit_code == 1 and "exists and is not empty; pass --force" in result.output
    result = runner.invoke(
        main, ["show", str(dataset / "d.rec"), "-o", str(dataset / "sheet.png"), "-n", "4"]
    )
    assert result.exit_code == 0 and "4 records" in result.output
    shutil.copy(dataset / "d.rec", dataset / "e.rec")
    shutil.copy(dataset / "d.idx", dataset / "e.idx")
    result = runner.invoke(
        main,
        ["merge", str(dataset / "d.rec"), str(dataset / "e.rec"), "-o", str(dataset / "de.rec")],
    )
    assert result.exit_code == 1 and "pass --renumber" in result.output
