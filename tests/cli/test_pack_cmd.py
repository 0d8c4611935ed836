"""``rec pack`` through CliRunner and as a real process (SIGINT, SIGKILL)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from im2rec.cli import main
from im2rec.listing.finding import find_lists
from im2rec.listing.lstfile import read_lst
from im2rec.packing import PackInterrupted, PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, unpack

from ..conftest import children_of, photo_folder, wait_gone, write_lst
from ..packing.test_resuming import interrupt_after
from .conftest import run


def test_list_then_pack_in_the_same_folder(example: Path) -> None:
    assert run("list", "./example", "--recursive", "-q")[0] == 0
    code, out = run("pack", "--pass-through", "--pack-label", "--num-workers", "2")
    assert code == 0, out
    assert "example.lst -> example.rec + example.idx: 18 records" in out
    reader = IndexedRecordReader(example / "example.rec")
    assert len(reader) == 18
    header, payload = unpack(reader.read_key(0))
    entry = next(e for e in read_lst(example / "example.lst") if e.key == 0)
    assert payload == (example / "example" / entry.path).read_bytes()
    assert header.label == entry.labels[0]


@pytest.mark.slow
def test_failures_strict_and_report(example: Path) -> None:
    write_lst(example / "bad.lst", ["class0/0.jpg", "nope.jpg", "class0/1.jpg"])
    (example / "bad").mkdir()
    code, out = run("pack", "bad.lst", "--root", "example")
    assert code == 0 and "1 failed (1 missing); listed in bad.failures.tsv" in out
    code, out = run("pack", "bad.lst", "--root", "example", "--strict", "-q")
    assert code == 1 and out == "Error: 1 image(s) failed (--strict); see the failure report(s)\n"
    assert (example / "bad.rec").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("0\t1.0\ta.jpg\n1\ta.jpg\n", "bad.lst:2: expected `index<TAB>label<TAB>path`"),
        ("0\t1.0\ta.jpg\nx\t1.0\tb.jpg\n", "bad.lst:2: invalid literal for int()"),
        ("0\t1.0\ta.jpg\n0\t1.0\tb.jpg\n", "bad.lst:2: index 0 is already used on line 1"),
        ("-1\t1.0\ta.jpg\n", "bad.lst:1: index -1 is outside 0..2**64-1"),
        ("0\t1.0\ta\0.jpg\n", "bad.lst:1: the path holds a NUL character"),
    ],
)
@pytest.mark.slow
def test_malformed_lists(example: Path, content: str, message: str) -> None:
    (example / "bad.lst").write_text(content)
    code, out = run("pack", "bad.lst", "--root", "example")
    assert code == 1 and message in out


def test_usage_errors(example: Path) -> None:
    code, out = run("pack", "--pass-through", "--resize", "64")
    assert (
        code == 2 and "--pass-through stores the files unchanged, so --resize cannot apply" in out
    )
    code, out = run("pack", "missing.lst")
    assert code == 2 and "missing.lst: list file not found" in out
    code, out = run("pack")
    assert code == 2 and "no .lst files in ." in out


def test_resume_flag_skips_finished_work(example: Path) -> None:
    run("list", "./example", "--recursive", "-q")
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("pack", "--pass-through", "--resume")
    assert code == 0 and "already packed into example.rec (--resume); nothing to do" in out


@pytest.fixture
def many(tmp_path: Path) -> Path:
    """Enough images that a real `rec pack` runs for a few seconds."""
    size = lambda i: (200 + i % 97, 150 + i % 61)  # noqa: E731
    names = photo_folder(tmp_path / "many", 1500, size, "{i:04d}.jpg", quality=90)
    return write_lst(tmp_path / "many.lst", names)


def rec_cmd(lst: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "im2rec",
        "pack",
        str(lst),
        "--resize",
        "120",
        "--num-workers",
        "2",
        "-q",
        *extra,
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("who", "sig"),
    [
        ("rec", signal.SIGINT),
        ("rec", signal.SIGTERM),
        ("rec", signal.SIGKILL),
        ("worker", signal.SIGKILL),
    ],
)
@pytest.mark.slow
def test_real_process_interrupted_then_resumed(many: Path, who: str, sig: signal.Signals) -> None:
    """Ctrl-C, SIGTERM (a batch scheduler's stop) or kill -9 of a real `rec
    pack`, or kill -9 of one of its workers (what the OOM killer does), then
    --resume: the same bytes."""
    subprocess.run(rec_cmd(many), check=True)
    reference = (many.with_suffix(".rec").read_bytes(), many.with_suffix(".idx").read_bytes())
    for ext in (".rec", ".idx", ".pack.json"):
        many.with_suffix(ext).unlink()
    # faulthandler: a hang below is reported with every thread's stack
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(rec_cmd(many), stderr=subprocess.PIPE, text=True, env=env)
    partial = many.with_suffix(".rec.partial")
    deadline = time.monotonic() + 60
    # interrupt early (the writer flushes 1 MiB at a time), so that a busy
    # machine cannot finish the run between this check and the signal
    early = max(len(reference[0]) // 5, 1 << 20)
    while time.monotonic() < deadline and (not partial.exists() or partial.stat().st_size < early):
        time.sleep(0.01)
    if proc.poll() is not None:
        pytest.fail(f"rec pack ended (exit {proc.returncode}) before it could be interrupted: "
                    f"{proc.communicate()[1][-2000:]}")  # fmt: skip
    workers = children_of(proc.pid)
    if who == "rec":
        proc.send_signal(sig)
    else:
        os.kill(workers[0], sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for pid in [*children, str(proc.pid)]:  # each dumps its threads' stacks, and ends
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGABRT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # so a hang fails this test alone, not the next one too
            _, err = proc.communicate()
        pytest.fail(f"rec pack did not exit within 60 s of {sig.name}:\n{err[-12000:]}")
    if who == "worker":
        assert proc.returncode == 1, err
        assert f"{many}: a worker process died after" in err and "--resume" in err, err
        assert "Traceback" not in err
    elif sig in (signal.SIGINT, signal.SIGTERM):
        assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
        assert "run the same command with --resume" in err
        assert "Traceback" not in err
        stopped = re.search(r"interrupted after ([\d,]+) of 1,500 entries of ", err)
        assert stopped, err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert not many.with_suffix(".rec").exists()
    wait_gone(workers)  # orphaned workers notice their parent is gone
    done = subprocess.run(
        rec_cmd(many, "--resume", "--json"), check=True, capture_output=True, text=True
    )
    resumed_from = json.loads(done.stdout)[0]["resumed_from"]
    assert resumed_from > 0
    if sig in (signal.SIGINT, signal.SIGTERM) and who == "rec":
        # an orderly stop writes all it has: the two counts agree
        assert stopped and resumed_from == int(stopped.group(1).replace(",", ""))
    assert (
        many.with_suffix(".rec").read_bytes(),
        many.with_suffix(".idx").read_bytes(),
    ) == reference
    assert not list(many.parent.glob("*.partial*"))
    os.sync()


@pytest.mark.slow
def test_a_file_size_limit_stops_a_real_pack_and_resume_finishes(tmp_path: Path) -> None:
    """A `rec pack` whose output may grow no further (``ulimit -f``, as on a
    shared cluster, or FAT32's 4 GiB; a full disk fails the same way) stops
    with one line naming the file and what to do, keeps its partial output,
    and --resume without the limit gives the same bytes as a clean run."""
    import resource

    names = photo_folder(tmp_path / "big", 120, lambda i: (160 + i % 37, 120), quality=95)
    lst = write_lst(tmp_path / "big.lst", names)
    cmd = [sys.executable, "-m", "im2rec", "pack", str(lst), "--pass-through", "-q",
           "--num-workers", "2"]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=120)
    reference = (lst.with_suffix(".rec").read_bytes(), lst.with_suffix(".idx").read_bytes())
    for ext in (".rec", ".idx", ".pack.json"):
        lst.with_suffix(ext).unlink()
    limit = len(reference[0]) // 3

    def small_files() -> None:
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1])
        )

    stopped = subprocess.run(
        cmd, preexec_fn=small_files,  # noqa: PLW1509 - no threads in the parent at this point
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert stopped.returncode == 1, stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert stopped.stderr.count("Error:") == 1, stopped.stderr
    assert f"big.rec.partial may grow no larger than {limit:,} bytes" in stopped.stderr
    assert "--resume" in stopped.stderr
    assert lst.with_suffix(".rec.partial").stat().st_size == limit
    assert not lst.with_suffix(".rec").exists()
    done = subprocess.run([*cmd, "--resume", "--json"], check=True, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert json.loads(done.stdout)[0]["resumed_from"] > 0
    assert (lst.with_suffix(".rec").read_bytes(), lst.with_suffix(".idx").read_bytes()) == reference
    assert not list(tmp_path.glob("*.partial*"))


@pytest.mark.slow
def test_a_wrong_root_is_an_error_not_an_empty_success(example: Path) -> None:
    assert run("list", "./example", "--recursive", "-q")[0] == 0
    (example / "elsewhere").mkdir()
    code, output = run("pack", "example.lst", "--root", "elsewhere", "-q")
    assert code == 1, output
    assert "example.lst: every one of its 18 images failed (18 missing) (listed in" in output
    assert "so no .rec was written" in output and not (example / "example.rec").exists()
    assert (
        f"most were not found under {example / 'elsewhere'}: is that the folder the list's"
        in output
    )
    assert "Pass it with --root" in output


def test_most_images_failing_is_said(example: Path) -> None:
    assert run("list", "./example", "--recursive", "-q")[0] == 0
    for f in sorted((example / "example").rglob("*.jpg"))[:12]:
        f.unlink()
    result = CliRunner().invoke(main, ["pack", "example.lst", "--pass-through"])
    assert result.exit_code == 0
    assert (
        "example.lst: 12 of 18 images failed, more than were packed; most were not found"
        in result.output
    )


def test_a_folder_of_images_says_to_list_it_first(example: Path) -> None:
    code, output = run("pack", "./example/")
    assert code == 2
    assert "which is a folder of images: list it first, `rec list ./example/ --recursive`" in output


def test_an_interrupted_run_is_not_thrown_away_without_overwrite(example: Path) -> None:
    """Running an interrupted pack again without --resume is refused,
    naming --resume and --overwrite (it had discarded hours of work); with
    --overwrite it starts over and says what it discarded; with --resume it
    continues, in both layouts."""
    from im2rec.packing import PackInterrupted, PackOptions, pack_list

    assert run("list", "./example", "--recursive", "-q")[0] == 0

    def stop(done: int, _total: int, _bytes: int) -> None:
        if done == 5:
            raise KeyboardInterrupt

    for layout in ("plain", "insightface"):
        with pytest.raises(PackInterrupted):
            pack_list(example / "example.lst", PackOptions(pass_through=True, layout=layout),
                      on_progress=stop)  # fmt: skip
        partial = example / (
            ".example.insightface.rec.partial" if layout == "insightface" else "example.rec.partial"
        )
        size = partial.stat().st_size
        args = ["pack", "example.lst", "--pass-through", "--layout", layout, "--overwrite"]
        result = CliRunner().invoke(main, args[:-1])
        assert result.exit_code == 1, result.output
        assert (
            f"{partial.name}: an interrupted run of example.lst left {size:,} bytes of partial output; "
            "run the same command with --resume to continue it, or with --overwrite to start over"
        ) in result.output
        assert partial.stat().st_size == size  # nothing discarded
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        assert (
            f"example.lst: an interrupted run's partial output ({size:,} bytes) was discarded "
            "and packing started over (--overwrite)"
        ) in result.output
        assert not partial.exists()


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
def test_pack_refuses_to_replace_a_rec_packed_with_other_options(listed: Path) -> None:
    assert run("pack", "--resize", "32", "-q")[0] == 0
    before = (listed / "example.rec").read_bytes()
    code, out = run("pack", "-q")  # every .lst, with the default options
    assert code == 1, out
    assert "example.rec: already packed with --resize 32 (now 0); pass --overwrite" in out
    assert (listed / "example.rec").read_bytes() == before
    code, out = run("pack", "-q", "--overwrite")
    assert code == 0, out
    assert (listed / "example.rec").read_bytes() != before


@pytest.mark.slow
def test_pack_names_flags_and_list_changes(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    code, out = run("pack", "--quality", "80", "-q")
    assert code == 1
    assert "already packed with --pass-through (now without), with --quality 95 (now 80)" in out
    lst = listed / "example.lst"
    lst.write_text("".join(lst.read_text().splitlines(keepends=True)[:-1]))
    code, out = run("pack", "--pass-through", "-q")
    assert code == 1
    assert "already packed from another version of example.lst (it changed since)" in out


def test_pack_refuses_a_rec_it_did_not_make(listed: Path) -> None:
    (listed / "example.rec").write_bytes(b"made by someone else")
    code, out = run("pack", "example.lst", "--pass-through", "-q")
    assert code == 1
    assert "example.rec: already exists, and not from rec pack (no example.pack.json" in out
    assert (listed / "example.rec").read_bytes() == b"made by someone else"


def test_the_identical_command_may_run_again(listed: Path) -> None:
    assert run("pack", "--pass-through", "-q")[0] == 0
    before = (listed / "example.rec").read_bytes()
    assert run("pack", "--pass-through", "-q")[0] == 0
    assert (listed / "example.rec").read_bytes() == before
    code, out = run("pack", "--pass-through", "--resume")
    assert code == 0 and "nothing to do" in out


@pytest.mark.slow
def test_sharded_pack_refuses_to_replace_other_shards(listed: Path) -> None:
    assert run("pack", "--shards", "2", "--resize", "32", "-q")[0] == 0
    code, out = run("pack", "--shards", "2", "-q")
    assert code == 1
    assert "example-00000-of-00002.rec: already packed with --resize 32 (now 0)" in out
    assert "pass --overwrite to replace the shards" in out
    assert run("pack", "--shards", "2", "-q", "--overwrite")[0] == 0


def test_resumed_summary_counts_this_run(listed: Path) -> None:
    with pytest.raises(PackInterrupted, match="interrupted after 5 of 18 entries"):
        pack_list(
            listed / "example.lst", PackOptions(pass_through=True), on_progress=interrupt_after(5)
        )
    code, out = run("pack", "--pass-through", "--resume")
    assert code == 0, out
    assert "18 records" in out
    assert "resumed after 5 of 18 entries, the other 13 in " in out


@pytest.mark.slow
def test_resuming_a_run_that_was_allowed_to_overwrite(listed: Path) -> None:
    assert run("pack", "--resize", "32", "-q")[0] == 0

    with pytest.raises(PackInterrupted):
        pack_list(
            listed / "example.lst", PackOptions(pass_through=True), on_progress=interrupt_after(5)
        )
    code, out = run("pack", "--pass-through", "--resume", "-q")
    assert code == 0, out  # --overwrite is not needed a second time
    code, out = run("info", "example.rec", "--json")
    assert json.loads(out)["records"] == 18
    manifest = json.loads((listed / "example.pack.json").read_text())
    assert manifest["options"]["pass_through"] and manifest["resumed_from"] == 5


@pytest.mark.slow
def test_targets(example: Path) -> None:
    run("list", "./example", "--recursive", "--train-ratio", "0.5", "-q")
    write_lst(example / "other.lst", ["class0/0.jpg"])
    assert [p.name for p in find_lists([])] == ["example_train.lst", "example_val.lst", "other.lst"]
    assert [p.name for p in find_lists(["example"])] == ["example_train.lst", "example_val.lst"]
    assert [p.name for p in find_lists(["other.lst"])] == ["other.lst"]
    code, out = run("pack", "example", "--num-thread", "2", "--resize", "32", "--json")
    assert code == 0
    data = json.loads(out)
    assert [Path(r["rec"]).name for r in data] == ["example_train.rec", "example_val.rec"]
    assert sum(r["records"] for r in data) == 18
