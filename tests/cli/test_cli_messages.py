"""What the commands say (through the real CLI): they recognise what they
were given, and their output reads right (sizes, counts, `rec` alone,
`rec -V`, whole command summaries)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from im2rec.cli.common import count_text, size_text

from .test_cli_pack import example, run

__all__ = ["example"]


@pytest.fixture
def listed(example: Path) -> Path:
    assert run("list", "./example", "--recursive", "-q")[0] == 0
    return example


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


def test_pack_with_a_trailing_slash_finds_the_list_beside_the_folder(listed: Path) -> None:
    code, out = run("pack", "example/", "--pass-through", "-q")
    assert code == 0, out
    assert (listed / "example.rec").stat().st_size > 0


def test_pack_given_a_rec_says_what_to_pack(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("pack", "example.rec")
    assert code == 2
    assert "example.rec is a record file (what rec pack makes), not a list; to pack its list: " \
           "`rec pack example.lst`" in out  # fmt: skip
    (listed / "example.lst").unlink()
    code, out = run("pack", "example.rec")
    assert code == 2 and "to look inside it: `rec info example.rec`" in out, out


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


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 bytes"), (1, "1 byte"), (580, "580 bytes"), (999, "999 bytes"), (1000, "1.0 kB"),
     (13_500, "13.5 kB"), (95_932, "95.9 kB"), (999_960, "1.0 MB"), (2_400_000_000, "2.4 GB")],
)  # fmt: skip
def test_sizes_read_as_people_read_them(size: int, text: str) -> None:
    assert size_text(size) == text


def test_counts_agree_with_their_nouns() -> None:
    assert count_text(1, "record") == "1 record"
    assert count_text(1500, "record") == "1,500 records"
    assert count_text(0, "identity", "identities") == "0 identities"


def test_info_and_verify_of_a_small_rec_read_right(listed: Path) -> None:
    (listed / "example").rename(listed / "one")
    (listed / "one" / "class0" / "0.jpg").rename(listed / "keep.jpg")
    for folder in (listed / "one").iterdir():
        for f in folder.iterdir():
            f.unlink()
    (listed / "keep.jpg").rename(listed / "one" / "class0" / "0.jpg")
    assert run("list", "./one", "--recursive", "-q")[0] == 0
    assert run("pack", "one.lst", "--pass-through", "-q")[0] == 0
    code, out = run("info", "one.rec")
    assert code == 0 and "records  1\n" in out, out
    size = (listed / "one.rec").stat().st_size
    assert f"one.rec: {size_text(size)}" in out and "0.0 MB" not in out
    code, out = run("verify", "one.rec")
    assert code == 0 and f"one.rec: 1 record, {size_text(size)}: OK" in out, out


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


def test_the_split_the_docs_describe_is_the_one_rec_list_makes(listed: Path) -> None:
    """getting-started said a plain --train-ratio 0.8 gave "80/20, split in
    each class"; it splits the shuffled list (im2rec.py's rule), so a class's
    share varies. The docs now say so and point to --stratify, which does
    split each class: checked here, and the sentence with it."""
    from im2rec.listing.lstfile import iter_lst

    code, out = run("list", "./example", "--recursive", "--train-ratio", "0.5", "--stratify", "-q",
                    "-o", "strat")  # fmt: skip
    assert code == 0, out

    def per_class(name: str) -> dict[float, int]:
        counts: dict[float, int] = {}
        for item in iter_lst(listed / name):
            counts[item.labels[0]] = counts.get(item.labels[0], 0) + 1
        return counts

    assert per_class("strat_train.lst") == per_class("strat_val.lst") == {0.0: 3, 1.0: 3, 2.0: 3}
    docs = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text()
    assert "split in\neach class" not in docs and "`--stratify` splits each class" in docs
