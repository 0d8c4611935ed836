"""The ``rec`` entry point: version, help, and the error contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import PIL
from click.testing import CliRunner

from im2rec import __version__
from im2rec.cli import EXIT_INTERRUPTED, handle_errors, main
from im2rec.errors import MissingFileError


def test_version_names_package_and_imaging_backend() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    first, second = result.output.splitlines()
    assert first == f"rec (im2rec) {__version__}"
    assert second.startswith(("Pillow-SIMD ", "Pillow ")) and PIL.__version__ in second
    assert "libjpeg" in second


def test_help_has_examples() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "Examples:" in result.output


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


def _command(exc: BaseException) -> click.Command:
    @click.command()
    def cmd() -> None:
        with handle_errors():
            raise exc

    return cmd


def test_library_errors_become_one_line() -> None:
    result = CliRunner().invoke(_command(MissingFileError("x.rec: record file not found")))
    assert result.exit_code == 1
    assert result.output == "Error: x.rec: record file not found\n"


def test_ctrl_c_exits_130() -> None:
    result = CliRunner().invoke(_command(KeyboardInterrupt()))
    assert result.exit_code == EXIT_INTERRUPTED
    assert "Interrupted" in result.output


def test_unknown_command_is_usage_error() -> None:
    result = CliRunner().invoke(main, ["frobnicate"])
    assert result.exit_code == 2 and "No such command" in result.output
