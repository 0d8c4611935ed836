"""What every command shares: library and file-system errors as one line with a
documented exit code, Ctrl-C and SIGTERM ending cleanly (130, 143), progress
bars that count their unit, and sizes and counts written as people read
them."""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from pathlib import Path

import click
import PIL
import PIL.Image
import pytest
from click.testing import CliRunner

from im2rec.cli import EXIT_INTERRUPTED, handle_errors, main
from im2rec.cli.common import count_text, size_text
from im2rec.errors import MissingFileError

from ..conftest import touch


def _command(exc: BaseException) -> click.Command:
    @click.command()
    def cmd() -> None:
        with handle_errors():
            raise exc

    return cmd


def _sigterm_to_self() -> click.Command:
    @click.command()
    def cmd() -> None:
        with handle_errors():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the handler raises long before

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


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "example"
    touch(root, "cats/1.jpg", "cats/2.JPG", "dogs/3.png", "dogs/4.jpeg", "dogs/5.webp", "root.jpg")
    return root


def test_progress_shows_on_a_terminal(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from rich.console import Console

    from im2rec.cli import common

    screen = io.StringIO()
    monkeypatch.setenv("FORCE_COLOR", "1")  # stderr is not a terminal under pytest
    monkeypatch.setattr(
        common, "err_console", lambda: Console(file=screen, force_terminal=True, width=100)
    )
    with common.progress_counter(
        lambda folders, images: f"Scanning: {images} images in {folders} folders"
    ) as tick:
        tick(3, 42)
    assert "Scanning: " in screen.getvalue()
    quiet = io.StringIO()
    monkeypatch.setattr(common, "err_console", lambda: Console(file=quiet, force_terminal=True))
    with common.progress_counter(lambda a, b: "x", quiet=True) as tick:
        tick(1, 1)
    assert quiet.getvalue() == ""


def test_terminal_precheck_follows_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from im2rec.cli.common import err_console, maybe_terminal

    for var in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    assert not maybe_terminal(io.StringIO()) and not maybe_terminal(object())
    # whenever rich would draw on stderr, the cheap check must not say no
    assert maybe_terminal(sys.stderr) or not err_console().is_terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert maybe_terminal(io.StringIO()) and err_console().is_terminal
