"""What the commands say (through the real CLI): they recognise what they
were given, and their output reads right (sizes, counts, `rec` alone,
`rec -V`, whole command summaries)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import run

#: every command that reads a .rec, with what else it needs
REC_COMMANDS = [
    ["info"], ["show", "-o", "sheet.png"], ["index"], ["verify"], ["verify", "--boxes"],
    ["unpack", "{}", "out"], ["export", "--to", "webdataset", "-o", "w-%03d.tar"],
    ["export", "--to", "parquet", "-o", "hub"], ["merge", "{}", "{}", "-o", "m.rec"],
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("given", ["example.lst", "example.idx", "example/class0/0.jpg"])
@pytest.mark.parametrize("command", REC_COMMANDS, ids=" ".join)
def test_what_is_not_a_rec_is_named_in_one_line_with_exit_2(
    listed: Path, command: list[str], given: str
) -> None:
    """A list, an index or an image given where a .rec goes: one line,
    exit 2 ("not what the command takes"), for every command. rec verify
    printed 22 more lines about offsets; rec info and rec show exit 1."""
    if "parquet" in command:
        pytest.importorskip("pyarrow")  # (without it, export says so first)
    if given == "example.idx":
        assert run("pack", "--pass-through", "-q")[0] == 0
    args = [a.replace("{}", given) for a in command]
    if "{}" not in " ".join(command):
        args.insert(1, given)
    done = subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, cwd=listed, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    what = {"example.lst": "this is a text list (.lst), not a .rec; pack it into one with "
            "`rec pack example.lst`", "example.idx": "this is an index (.idx), not a .rec",
            "example/class0/0.jpg": "this is a JPEG image, not a .rec"}[given]  # fmt: skip
    assert what in lines[0] and "no record starts at byte 0" not in lines[0]


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
