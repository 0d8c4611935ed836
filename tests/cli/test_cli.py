"""The ``rec`` entry point: version, help, and the error contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import PIL
import PIL.Image
import pytest
from click.testing import CliRunner

from im2rec import __version__
from im2rec.cli import main


def test_version_names_package_and_imaging_backend() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    first, second, codecs, native = result.output.splitlines()
    assert first == f"rec (im2rec) {__version__}"
    assert second.startswith(("Pillow-SIMD ", "Pillow ")) and PIL.__version__ in second
    assert "libjpeg" in second and native.startswith("native extensions: ")
    assert codecs.startswith("image codecs: ")


def test_help_has_examples() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "Examples:" in result.output


@pytest.mark.slow
def test_python_dash_m_and_console_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "im2rec", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith(f"rec (im2rec) {__version__}\n")
    script = Path(sys.executable).with_name("rec")
    if script.exists():  # installed (editable) in this venv
        done = subprocess.run(
            [str(script), "--version"], capture_output=True, text=True, check=True
        )
        assert done.stdout == out


def test_unknown_command_is_usage_error() -> None:
    result = CliRunner().invoke(main, ["frobnicate"])
    assert result.exit_code == 2 and "No such command" in result.output


def test_dash_is_stdin_for_the_rec_and_stdout_for_one_output(tmp_path: Path) -> None:
    import io

    from im2rec.recordio import IndexedRecordWriter, pack

    jpeg = io.BytesIO()
    PIL.Image.new("RGB", (8, 8), (200, 10, 10)).save(jpeg, "JPEG")
    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for i in range(3):
            w.write_key(i, pack((0, float(i), i, 0), jpeg.getvalue()))
    data = (tmp_path / "d.rec").read_bytes()
    try:  # stdout and stderr apart: click 8.2+ always, 8.1 when asked
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(main, ["index", "-", "-o", "-"], input=data)
    assert result.exit_code == 0, result.output
    assert result.stdout == (tmp_path / "d.idx").read_text()  # keys 0..2, as written
    assert "standard output: 3 records indexed" in result.stderr
    result = runner.invoke(main, ["index", "-"], input=data)
    assert result.exit_code == 2 and "standard input needs -o" in result.stderr
    result = runner.invoke(main, ["verify", "-"], input=data)
    assert result.exit_code == 0 and "3 records" in result.stdout
    result = runner.invoke(main, ["info", "-", "--json"], input=data)
    assert result.exit_code == 0 and '"records": 3' in result.stdout
    result = runner.invoke(main, ["show", "-", "-o", "-"], input=data)
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.startswith(b"\x89PNG\r\n\x1a\n")
    with PIL.Image.open(io.BytesIO(result.stdout_bytes)) as sheet:
        assert sheet.format == "PNG" and sheet.size == (2 * 128, 2 * (128 + 14))
    assert "standard output: 3 records" in result.stderr


def test_an_unknown_command_names_the_closest_one() -> None:
    result = CliRunner().invoke(main, ["lst", "./example"])
    assert result.exit_code == 2
    assert "Error: No such command 'lst'. Did you mean 'list'?\n" in result.output


def test_an_option_of_another_command_says_whose_it_is() -> None:
    result = CliRunner().invoke(main, ["pack", "--no-shuffle"])
    assert result.exit_code == 2
    assert (
        "Error: No such option '--no-shuffle' for `rec pack`: it is an option of `rec list` "
        "(im2rec.py took listing and packing options in one command line)"
    ) in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [(["pack", "-o", "x"], "rec pack writes each .rec beside its list (NAME.lst -> NAME.rec and "
      "NAME.idx); to choose the name, name the list: `rec list ROOT -o NAME`"),
     (["info", "x.rec", "--overwrite"], "it is an option of `rec convert`, `rec export`, "
      "`rec import`, `rec merge`, `rec pack`, `rec unpack`\n"),
     (["list", "x", "--num-workers", "2"], "it is an option of `rec imagenet`, `rec pack`\n")],
)  # fmt: skip
def test_an_option_of_several_commands_names_them_all(args: list[str], said: str) -> None:
    """`rec pack -o` said it was `rec convert`'s and spoke of im2rec.py;
    -o belongs to seven commands, and pack writes beside the list."""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and said in result.output, result.output
    assert "rec convert`" not in said or "im2rec.py" not in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [(["pack", "--resiz", "3"], "'--resiz' for `rec pack`. Did you mean '--resize'?"),
     (["pack", "--num-worker", "2"], "'--num-worker' for `rec pack`. Did you mean '--num-workers'?"),
     (["verify", "x.rec", "--images"], "'--images' for `rec verify`. Did you mean '--decode'?"),
     (["info", "x.rec", "--images"], "'--images' for `rec info`. Did you mean '--full'?")],
)  # fmt: skip
@pytest.mark.slow
def test_an_unknown_option_names_the_one_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    """A typo is matched by spelling; a word by what the options' help says
    (`rec verify --images` had suggested --manifest), in the words of an
    unknown command, through a real `rec`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.rec").write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"Error: No such option {said}"


@pytest.mark.parametrize(
    "args",
    [["info", "nothere.rec"], ["pack", "nothere.lst"], ["verify", "nothere.rec"],
     ["import", "webdataset", "nothere.tar", "-o", "y"], ["list", "nothere"],
     ["imagenet", "--download-dir", "nothere"], ["show", "nothere.rec", "-o", "s.png"]],
)  # fmt: skip
@pytest.mark.slow
def test_an_input_named_that_is_not_there_is_a_usage_mistake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """One convention for every command: exit 2 ("rec info" had exited 2,
    "rec pack" 1), one Error: line naming the input."""
    monkeypatch.chdir(tmp_path)
    done = subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "nothere" in errors[0] and "Traceback" not in done.stderr


def test_pack_help_explains_encoding_and_workers() -> None:
    result = CliRunner().invoke(main, ["pack", "--help"])
    text = " ".join(result.output.split())
    assert "Format of re-encoded images (PNG keeps alpha and 16 bits with --color -1)" in text
    assert "processes, or threads with --pass-through" in text
