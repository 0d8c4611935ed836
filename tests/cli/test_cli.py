"""The ``rec`` entry point: version, help, and the error contract."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import PIL
import PIL.Image
import pytest
from click.testing import CliRunner

from im2rec import __version__
from im2rec.cli import EXIT_INTERRUPTED, handle_errors, main
from im2rec.errors import MissingFileError


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


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (
            FileNotFoundError(errno.ENOENT, "No such file or directory", "no/such/.x.idx.42.tmp"),
            "Error: no/such/x.idx: the folder no/such does not exist; create it first\n",
        ),
        (
            PermissionError(errno.EACCES, "Permission denied", "ro/out.png"),
            "Error: ro/out.png: Permission denied; check its permissions\n",
        ),
        (OSError(errno.ENOSPC, "No space left on device"), "Error: No space left on device\n"),
    ],
)
def test_file_system_errors_become_one_line(exc: OSError, line: str) -> None:
    result = CliRunner().invoke(_command(exc))
    assert result.exit_code == 1 and result.output == line


def test_an_output_folder_that_does_not_exist(tmp_path: Path) -> None:
    import io

    from im2rec.recordio import IndexedRecordWriter, pack

    jpeg = io.BytesIO()
    PIL.Image.new("RGB", (8, 8)).save(jpeg, "JPEG")
    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        w.write_key(0, pack((0, 1.0, 0, 0), jpeg.getvalue()))
    # one rule for every command that writes: the folder is made
    for command, name in (("index", "out.idx"), ("show", "out.png")):
        target = tmp_path / "missing" / command / name
        result = CliRunner().invoke(main, [command, str(tmp_path / "d.rec"), "-o", str(target)])
        assert result.exit_code == 0, result.output
        assert target.stat().st_size > 0
    # where a folder still cannot be found (the library's own writes), the
    # error names it in one line
    from im2rec.cli.common import os_error_text

    gone = tmp_path / "gone" / "x.rec"
    error = FileNotFoundError(2, "No such file or directory", str(gone))
    assert (
        os_error_text(error) == f"{gone}: the folder {gone.parent} does not exist; create it first"
    )


def test_ctrl_c_exits_130() -> None:
    result = CliRunner().invoke(_command(KeyboardInterrupt()))
    assert result.exit_code == EXIT_INTERRUPTED
    assert result.output == "Interrupted; partial outputs were removed.\n"

    @click.command()
    def reads() -> None:
        with handle_errors(writes=False):
            raise KeyboardInterrupt

    result = CliRunner().invoke(reads)  # rec verify, rec info: nothing to remove
    assert result.exit_code == EXIT_INTERRUPTED
    assert result.output == "Interrupted; nothing was written.\n"


def _sigterm_to_self() -> click.Command:
    @click.command()
    def cmd() -> None:
        with handle_errors():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the handler raises long before

    return cmd


def test_sigterm_is_handled_like_ctrl_c_and_exits_143() -> None:
    before = signal.getsignal(signal.SIGTERM)
    result = CliRunner().invoke(_sigterm_to_self())
    assert result.exit_code == 143, result.output
    assert "Terminated (SIGTERM); partial outputs were removed." in result.output
    assert signal.getsignal(signal.SIGTERM) is before  # restored after the command


def test_an_interrupted_error_from_sigterm_exits_143() -> None:
    from im2rec.cli.common import Terminated
    from im2rec.packing import PackInterrupted

    @click.command()
    def cmd() -> None:
        with handle_errors():
            try:
                raise Terminated
            except KeyboardInterrupt:
                raise PackInterrupted("interrupted after 3 of 9 entries of x.lst") from None

    result = CliRunner().invoke(cmd)
    assert result.exit_code == 143 and "interrupted after 3 of 9" in result.output
    assert CliRunner().invoke(_command(PackInterrupted("interrupted"))).exit_code == 130


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
        "(im2rec.py took every option in one command line; rec splits listing from packing)"
    ) in result.output


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


def test_progress_bars_count_their_unit_and_rate_from_their_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bar counts records (or shows bytes as sizes: `rec verify` had shown
    "89214852/89214852 3,984,313,707 img/s"), and its rate counts from the
    bar's first update (a resumed pack's had counted the entries done
    before the resume)."""
    import io

    from rich.console import Console
    from rich.progress import Progress

    from im2rec.cli import common

    clock = [100.0]
    monkeypatch.setattr(common.time, "perf_counter", lambda: clock[0])
    with Progress(console=Console(file=io.StringIO(), force_terminal=True)) as progress:
        bar = common._Bar(progress)
        resumed = bar.track("ph.lst", total=0)
        resumed(1000, 2000, 50_000_000)  # the first update: 1,000 entries done before
        clock[0] += 2.0
        resumed(1100, 2000, 52_000_000)
        fields = progress.tasks[0].fields
        assert fields["count"] == "1,100/2,000" and fields["rate"] == "50 images/s  1.0 MB/s"
        verify = bar.track("big.rec", total=89_214_852, unit="bytes")
        verify(0, 89_214_852, 0)
        clock[0] += 0.5
        verify(89_214_852, 89_214_852, 89_214_852)
        fields = progress.tasks[1].fields
        assert fields["count"] == "89.2 MB/89.2 MB" and fields["rate"] == "178.4 MB/s"


@pytest.mark.slow
def test_rec_verify_shows_its_progress_as_sizes(tmp_path: Path) -> None:
    """Through a real `rec verify` on a terminal (TTY_COMPATIBLE)."""
    from im2rec.recordio import IndexedRecordWriter, pack

    with IndexedRecordWriter(tmp_path / "d.rec") as w:
        for key in range(200):
            w.write_key(key, pack((0, 1.0, key, 0), bytes(5000)))
    env = {**os.environ, "TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "COLUMNS": "160"}
    done = subprocess.run([sys.executable, "-m", "im2rec", "verify", str(tmp_path / "d.rec")],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1.0 MB/1.0 MB" in done.stderr and "img/s" not in done.stderr, done.stderr
