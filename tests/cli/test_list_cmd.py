"""``rec list`` through Click's CliRunner and as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from im2rec.cli import main

from ..conftest import touch


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "example"
    touch(root, "cats/1.jpg", "cats/2.JPG", "dogs/3.png", "dogs/4.jpeg", "dogs/5.webp", "root.jpg")
    return root


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_default_output_is_named_after_root_in_cwd(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out = run("list", str(tree), "--recursive")
    assert code == 0, out
    assert sorted(p.name for p in work.iterdir()) == [
        "example.classes.tsv",
        "example.lists.json",
        "example.lst",
    ]
    assert "Listed 5 images in 3 classes" in out and "example.lst" in out
    assert "Classes: 0 . (1 image), 1 cats (2 images), 2 dogs (2 images)" in out
    manifest = json.loads((work / "example.lists.json").read_text())
    assert manifest["root"] == str(tree) and manifest["options"]["recursive"] is True


def test_output_prefix_and_exts(tree: Path, tmp_path: Path) -> None:
    code, out = run(
        "list",
        str(tree),
        "--recursive",
        "-o",
        str(tmp_path / "out" / "x"),
        "--exts",
        "WEBP,.png",
        "--no-shuffle",
    )
    assert code == 0, out
    lines = (tmp_path / "out" / "x.lst").read_text().splitlines()
    assert lines == ["0\t0.000000\tdogs/3.png", "1\t0.000000\tdogs/5.webp"]


def test_json_summary(tree: Path, tmp_path: Path) -> None:
    code, out = run(
        "list",
        str(tree),
        "--recursive",
        "-o",
        str(tmp_path / "e"),
        "--train-ratio",
        "0.6",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["images"] == 5 and [c["images"] for c in data["classes"]] == [1, 2, 2]
    assert [(Path(x["path"]).name, x["images"]) for x in data["lists"]] == [
        ("e_val.lst", 2),
        ("e_train.lst", 3),
    ]
    assert data["skipped"] == {}


def test_skipped_files_are_reported(tree: Path, tmp_path: Path) -> None:
    touch(tree, "cats/bad\tname.jpg")
    result = CliRunner().invoke(main, ["list", str(tree), "--recursive", "-o", str(tmp_path / "e")])
    assert result.exit_code == 0
    assert (
        "Skipped 1 file(s): name cannot be stored in a .lst line: cats/bad\\tname.jpg"
        in result.output
    )
    assert f"All skipped files are listed in {tmp_path / 'e.skipped.tsv'}" in result.output
    code, out = run("list", str(tree), "--recursive", "-o", str(tmp_path / "s"), "--strict")
    assert code == 1
    assert out.endswith("1 name cannot be stored in a .lst line; nothing written (--strict)\n")
    assert not (tmp_path / "s.lst").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--chunks", "0"], 2, "Error: --chunks must be at least 1, got 0"),
        (["--train-ratio", "1.2"], 2, "Error: --train-ratio must be between 0 and 1, got 1.2"),
        (
            ["--train-ratio", "0.7", "--test-ratio", "0.4"],
            2,
            "Error: --train-ratio 0.7 plus --test-ratio 0.4 is more than 1",
        ),
        (["--min-per-class", "50"], 1, "no images left to list (5 class below --min-per-class)"),
    ],
)
def test_bad_options(tree: Path, tmp_path: Path, args: list[str], code: int, message: str) -> None:
    got, out = run("list", str(tree), "--recursive", "-o", str(tmp_path / "e"), *args)
    assert got == code and message in out
    assert list(tmp_path.glob("e.*")) + list(tmp_path.glob("e_*")) == []


def test_missing_root_and_file_root(tmp_path: Path) -> None:
    code, out = run("list", str(tmp_path / "nope"))
    assert code == 2 and "Directory" in out and "does not exist" in out
    (tmp_path / "f.jpg").write_bytes(b"x")
    code, out = run("list", str(tmp_path / "f.jpg"))
    assert code == 2 and "is a file" in out


def test_no_images_exit_1(tmp_path: Path) -> None:
    touch(tmp_path, "data/sub/a.jpg")
    code, out = run("list", str(tmp_path / "data"), "-o", str(tmp_path / "d"))
    assert code == 1
    assert (
        out
        == f"Error: {tmp_path / 'data'}: no images found (extensions .jpeg .jpg .png); images in subfolders are listed only with --recursive\n"
    )


def test_symlink_loop_exit_1(tree: Path, tmp_path: Path) -> None:
    (tree / "cats" / "up").symlink_to(tree, target_is_directory=True)
    code, out = run("list", str(tree), "--recursive", "-o", str(tmp_path / "e"))
    assert code == 1 and "symlink loop" in out and "--no-follow-links" in out
    code, _ = run(
        "list", str(tree), "--recursive", "-o", str(tmp_path / "e"), "--no-follow-links", "-q"
    )
    assert code == 0


@pytest.mark.slow
def test_real_subprocess(tree: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "im2rec", "list", str(tree), "--recursive", "--chunks", "2", "-q"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""  # quiet, and no progress on a pipe
    assert sorted(p.name for p in tmp_path.glob("example_*.lst")) == [
        "example_0.lst",
        "example_1.lst",
    ]


def test_help_has_examples() -> None:
    code, out = run("list", "--help")
    assert code == 0 and "Examples:" in out and "rec list ./example --recursive" in out


def test_every_command_is_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    import click

    names = main.list_commands(click.Context(main))  # type: ignore[attr-defined]
    assert {"list", "pack", "index", "verify", "info"} <= set(names)
    for name in names:
        assert f"rec {name}" in readme, name


def test_the_split_the_docs_describe_is_the_one_rec_list_makes(listed: Path) -> None:
    """A plain --train-ratio splits the shuffled list (im2rec.py's rule), so a
    class's share varies; --stratify splits each class. getting-started says
    so: checked here, and the sentence with it."""
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


def test_images_of_other_extensions_are_counted_and_the_option_named(tmp_path: Path) -> None:
    """ "Listed 3 images" of 7, with no word of the 4 left out."""
    from PIL import Image

    for name in ("a/0.jpg", "a/1.jpg", "a/2.jpg", "b/0.webp", "b/1.webp", "b/2.webp", "a/x.bmp"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        Image.new("RGB", (4, 4)).save(tmp_path / name)
    (tmp_path / "a" / "notes.txt").write_text("not an image")
    code, out = run("list", str(tmp_path), "--recursive", "-o", str(tmp_path / "o"))
    assert code == 0, out
    assert (
        "Passed over 4 image files of other extensions (1 .bmp, 3 .webp); to list them too: "
        "--exts .jpeg,.jpg,.png,.bmp,.webp"
    ) in out
    for path in (tmp_path / "a").glob("*.jpg"):
        path.unlink()
    code, out = run("list", str(tmp_path), "--recursive", "-o", str(tmp_path / "o"))
    assert code == 1 and "it holds image files of other extensions (1 .bmp, 3 .webp)" in out
    code, out = run("list", str(tmp_path), "--recursive", "--exts", ".jpeg,.jpg,.png,.bmp,.webp",
                    "-o", str(tmp_path / "o"))  # fmt: skip
    assert code == 0 and "Listed 4 images" in out, out
