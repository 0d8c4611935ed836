"""What the commands say (through the real CLI): they recognise what they
were given, and their output reads right (sizes, counts, `rec` alone,
`rec -V`, whole command summaries)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import run


@pytest.mark.parametrize("command", ["info", "show", "index"])
def test_a_list_given_to_a_rec_command_is_named_as_one(listed: Path, command: str) -> None:
    code, out = run(command, "example.lst")
    assert code == 1, out
    assert "example.lst: this is a text list (.lst), not a .rec; pack it into one with " \
           "`rec pack example.lst`" in out  # fmt: skip
    assert "no record starts at byte 0" not in out and "Traceback" not in out


def test_an_image_or_an_index_given_as_a_rec_is_named(listed: Path) -> None:
    code, out = run("info", "example/class0/0.jpg")
    assert code == 1 and "this is a JPEG image, not a .rec" in out, out
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("info", "example.idx")
    assert code == 1 and "example.idx: this is an index (.idx), not a .rec" in out, out


@pytest.mark.slow
def test_rec_alone_shows_the_help_and_exits_0() -> None:
    done = subprocess.run([sys.executable, "-m", "im2rec"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Commands:" in done.stdout and "rec list ./example --recursive" in done.stdout


def test_rec_dash_capital_v_is_the_version() -> None:
    code, out = run("-V")
    assert code == 0 and out.startswith("rec (im2rec) ")


def test_command_summaries_are_whole_sentences() -> None:
    code, out = run("--help")
    commands = out.split("Commands:", 1)[1]
    assert code == 0 and "..." not in commands and "…" not in commands
    assert "like GluonCV's" in commands and "imagenet.py." in commands


def test_every_command_that_writes_creates_its_output_folder(listed: Path) -> None:
    """One rule: `rec export` created its folders while `rec import` said
    "create it first"; now every command that writes creates them."""
    assert run("pack", "--pass-through", "-q")[0] == 0
    steps = [
        ("export", "example.rec", "--to", "webdataset", "-o", "shards/x-%06d.tar", "-q"),
        ("import", "webdataset", "shards/x-000000.tar", "-o", "back/ex", "-q"),
        ("merge", "example.rec", "back/ex.rec", "-o", "merged/all.rec", "--renumber"),
        ("index", "example.rec", "-o", "indexes/example.idx"),
        ("show", "example.rec", "-o", "sheets/sheet.png"),
    ]
    for step in steps:
        code, out = run(*step)
        assert code == 0, (step, out)
    for made in ("back/ex.rec", "merged/all.rec", "indexes/example.idx", "sheets/sheet.png"):
        assert (listed / made).stat().st_size > 0, made
    assert (listed / "back/ex.rec").read_bytes() == (listed / "example.rec").read_bytes()
