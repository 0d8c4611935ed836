"""The ``im2rec`` drop-in command (im2rec.py's command line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from im2rec.cli.im2rec_compat import main
from im2rec.recordio import IndexedRecordReader, unpack

from ..conftest import photo


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for c in ("a", "b"):
        for i in range(5):
            (tmp_path / "imgs" / c).mkdir(parents=True, exist_ok=True)
            photo(30 + i, 20 + i, i).save(tmp_path / "imgs" / c / f"{i}.jpg")
    return tmp_path


def run(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    return int(exit_info.value.code or 0)


def test_list_then_pack(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix, root = str(tree / "data"), str(tree / "imgs")
    assert run(prefix, root, "--list", "--recursive", "--train-ratio", "0.8") == 0
    out = capsys.readouterr()
    assert out.out == "a 0\nb 1\n"  # the class map, printed as im2rec.py did
    assert "hint: the same with rec: rec list" in out.err
    assert (
        run(prefix, root, "--pass-through", "--pack-label", "--num-thread", "2", "--resize", "64")
        == 0
    )
    out = capsys.readouterr()
    assert f"Creating .rec file from {prefix}_train.lst in {tree}" in out.out
    assert "--resize ignored with --pass-through (as in im2rec.py)" in out.err
    reader = IndexedRecordReader(tree / "data_train.rec")
    assert len(reader) == 8 and all(unpack(reader.read_key(k))[0].id == k for k in reader.keys)
    assert (tree / "data_val.rec").exists()


def test_nothing_to_pack(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(str(tree / "nothing"), str(tree / "imgs")) == 0
    assert capsys.readouterr().out == f"Did not find and list file with prefix {tree / 'nothing'}\n"


def test_errors(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(str(tree / "d"), str(tree / "missing"), "--list") == 1
    assert "im2rec: error: " in capsys.readouterr().err
    assert run(str(tree / "d"), str(tree / "imgs"), "--list", "--chunks", "0") == 1
    assert "--chunks must be at least 1" in capsys.readouterr().err
    assert run(str(tree / "d"), str(tree / "imgs"), "--color", "5") == 2  # argparse's own check


@pytest.mark.slow
def test_console_script(tree: Path) -> None:
    script = Path(sys.executable).with_name("im2rec")
    if not script.exists():
        pytest.skip("the im2rec console script is not installed in this environment")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    assert "--pass-through" in done.stdout and "--num-thread" in done.stdout


@pytest.mark.slow
def test_the_hint_makes_the_same_records(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The printed `rec pack` command carries every option that changes the
    records (it used to drop --resize and the rest)."""
    import shlex

    from click.testing import CliRunner

    from im2rec.cli import main as rec

    prefix, root = str(tree / "data"), str(tree / "imgs")
    assert run(prefix, root, "--list", "--recursive") == 0
    options = ["--resize", "24", "--quality", "80", "--center-crop", "--color", "0"]
    assert run(prefix, root, "--num-thread", "2", *options) == 0
    hint = capsys.readouterr().err.split("hint: the same with rec: ")[-1].strip()
    assert hint.startswith(f"rec pack {prefix} --root {root} ")
    assert set(hint.split()[5:]) == set(options)
    ours = (tree / "data.rec").read_bytes()
    (tree / "data.rec").unlink()
    done = CliRunner().invoke(rec, [*shlex.split(hint)[1:], "-q"])
    assert done.exit_code == 0, done.output
    assert (tree / "data.rec").read_bytes() == ours


@pytest.mark.slow
def test_an_interrupted_run_continues_with_resume(tree: Path) -> None:
    """The interruption message says to run again with --resume: im2rec
    takes it (im2rec.py has no such option) and finishes the same bytes."""
    from im2rec.packing import PackInterrupted, PackOptions, pack_list

    prefix, root = str(tree / "data"), str(tree / "imgs")
    assert run(prefix, root, "--list", "--recursive") == 0
    assert run(prefix, root, "--resize", "24") == 0
    want = (tree / "data.rec").read_bytes(), (tree / "data.idx").read_bytes()
    for ext in (".rec", ".idx", ".pack.json"):
        (tree / f"data{ext}").unlink()

    def interrupt(done: int, _total: int, _bytes: int) -> None:
        if done == 4:
            raise KeyboardInterrupt

    with pytest.raises(PackInterrupted, match="--resume"):
        pack_list(tree / "data.lst", PackOptions(resize=24), root=root, on_progress=interrupt)
    assert run(prefix, root, "--resize", "24", "--resume") == 0
    assert ((tree / "data.rec").read_bytes(), (tree / "data.idx").read_bytes()) == want
    manifest = (tree / "data.pack.json").read_text()
    assert '"resumed_from": 4' in manifest


@pytest.mark.slow
def test_starting_over_as_im2rec_does_says_what_it_discarded(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --resume, im2rec.py starts over; so does the drop-in (scripts
    rerun it), but it says how much partial output it discarded."""
    from im2rec.packing import PackInterrupted, PackOptions, pack_list

    prefix, root = str(tree / "data"), str(tree / "imgs")
    assert run(prefix, root, "--list", "--recursive") == 0

    def interrupt(done: int, _total: int, _bytes: int) -> None:
        if done == 4:
            raise KeyboardInterrupt

    with pytest.raises(PackInterrupted):
        pack_list(tree / "data.lst", PackOptions(resize=24), root=root, on_progress=interrupt)
    size = (tree / "data.rec.partial").stat().st_size
    capsys.readouterr()
    assert run(prefix, root, "--resize", "24") == 0
    assert (
        f"an interrupted run's partial output ({size:,} bytes) was discarded and packing "
        "started over, as im2rec.py does; --resume continues one"
    ) in capsys.readouterr().err


def test_the_list_hint_makes_the_same_lists(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    from click.testing import CliRunner

    from im2rec.cli import main as rec

    prefix, root = str(tree / "data"), str(tree / "imgs")
    options = ["--recursive", "--chunks", "2", "--train-ratio", "0.8", "--test-ratio", "0.1"]
    assert run(prefix, root, "--list", *options, "--exts", ".jpg", "--no-shuffle") == 0
    hint = capsys.readouterr().err.split("hint: the same with rec: ")[-1].strip()
    for flag in ("--recursive", "--chunks 2", "--train-ratio 0.8", "--test-ratio 0.1",
                 "--exts .jpg", "--no-shuffle"):  # fmt: skip
        assert f" {flag}" in hint, hint
    lists = {p.name: p.read_bytes() for p in tree.glob("data*.lst")}
    assert len(lists) == 6  # 2 chunks x train/val/test
    for p in tree.glob("data*"):
        p.unlink()
    done = CliRunner().invoke(rec, [*shlex.split(hint)[1:], "-q"])
    assert done.exit_code == 0, done.output
    assert {p.name: p.read_bytes() for p in tree.glob("data*.lst")} == lists


def test_help_shows_no_default_for_the_no_shuffle_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    line = next(ln for ln in help_text.splitlines() if "--no-shuffle " in ln)
    assert "default" not in line and "keep the walk order" in line
