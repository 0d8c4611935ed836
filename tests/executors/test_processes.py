"""The worker pools: Processes, fed through one socket (ImageRecordIter's,
and LocalExecutor's on Linux), and Pipes, a pipe a worker (LocalExecutor's
where the socket pool cannot run): each test runs on both where it applies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from im2rec.errors import Im2RecError, ImageCodecError
from im2rec.executors import WorkerCrashed, check_stop, fork_is_safe
from im2rec.executors.pipes import Pipes
from im2rec.executors.processes import _PART, JOB_BYTES, Processes

pytestmark = [
    pytest.mark.skipif(not fork_is_safe(), reason="forked workers need Linux and fork"),
    pytest.mark.slow,  # (processes: `make test-fast` leaves them out)
]


@pytest.fixture(params=[Processes, Pipes], ids=["sockets", "pipes"])
def Pool(request: pytest.FixtureRequest) -> type[Processes | Pipes]:  # noqa: N802
    return request.param  # type: ignore[no-any-return]


def _echo(job: object) -> object:
    if isinstance(job, tuple) and job[0] == "sleep":
        if len(job) > 2:  # says it started: a file in that folder
            Path(job[2], str(os.getpid())).touch()
        for _ in range(int(job[1] * 100)):  # an image at a time, as fill_batch
            check_stop()
            time.sleep(0.01)
        return os.getpid()
    if isinstance(job, tuple) and job[0] == "big":
        return bytes(range(256)) * (job[1] // 256)
    if job == "fail":
        raise ImageCodecError("cannot decode image: broken data")
    if job == "unpicklable":
        raise _Unpicklable("a lambda inside", lambda: None)
    if job == "no way back":
        raise _TwoArguments("a file", 7)
    if job == "trap":
        return _Trap()
    return job


class _Unpicklable(Exception):
    pass


def _refuse() -> None:
    raise RuntimeError("this value cannot be rebuilt here")


class _TwoArguments(Exception):
    """Pickles but does not unpickle, as an exception whose __init__ takes
    other arguments than its args does (unless tblib's pickling support,
    which dask installs, rebuilds it without __init__: so the rebuild here
    fails whatever is installed)."""

    def __init__(self, where: str, line: int) -> None:
        super().__init__(f"{where}:{line}: broken")

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return _refuse, ()


class _Trap:
    """A value that pickles in the worker and cannot be rebuilt anywhere."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return _refuse, ()


def _started(marks: Path, count: int) -> None:
    """Until ``count`` workers have begun a job (they mark it in ``marks``)."""
    deadline = time.monotonic() + 30
    while len(list(marks.iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(list(marks.iterdir())) >= count


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line for line in f)
    except FileNotFoundError:
        return False


def test_results_come_back_to_the_job_that_asked_in_any_order(
    Pool: type[Processes | Pipes],
) -> None:
    pool = Pool(2, _echo)
    try:
        tickets = [pool.submit(i) for i in range(20)]
        assert [t.result() for t in reversed(tickets)] == list(reversed(range(20)))
        assert tickets[0].cancel() is False  # sent: it may be running
    finally:
        pool.close()


def test_a_result_larger_than_a_message_arrives_whole(Pool: type[Processes | Pipes]) -> None:
    pool = Pool(2, _echo)
    try:
        size = 5 * _PART + 256 * 7
        small, big, after = pool.submit(1), pool.submit(("big", size)), pool.submit(2)
        assert big.result() == bytes(range(256)) * (size // 256)
        assert (small.result(), after.result()) == (1, 2)
    finally:
        pool.close()


def test_a_job_error_is_raised_as_itself_and_the_pool_goes_on(
    Pool: type[Processes | Pipes],
) -> None:
    pool = Pool(2, _echo)
    try:
        with pytest.raises(ImageCodecError, match="broken data"):
            pool.submit("fail").result()
        with pytest.raises(Im2RecError, match="_Unpicklable: .*a lambda inside"):
            pool.submit("unpicklable").result()
        assert pool.submit(3).result() == 3
    finally:
        pool.close()


def test_an_outcome_that_does_not_unpickle_stays_its_jobs_and_is_kept(
    Pool: type[Processes | Pipes],
) -> None:
    """An error that pickles but does not unpickle lost its job's outcome,
    raised a TypeError in whichever result() read it, and a second result()
    waited for ever."""
    pool = Pool(2, _echo)
    try:
        odd = pool.submit("no way back")
        trap = pool.submit("trap")
        after = pool.submit(5)
        assert after.result(timeout=10) == 5  # (read them all: none is another's)
        for _ in range(2):  # the same outcome each time it is asked, at once
            with pytest.raises(Im2RecError, match=r"_TwoArguments: a file:7: broken"):
                odd.result(timeout=10)
            with pytest.raises(Im2RecError, match=r"job \d+'s result does not unpickle here"):
                trap.result(timeout=10)
            assert after.result(timeout=1) == 5
        assert pool.submit(6).result(timeout=10) == 6 and not pool.broken
    finally:
        pool.close()


@pytest.mark.parametrize("start", ["fork", "forkserver", "spawn"])
def test_a_job_too_large_for_one_message_reaches_one_worker_whole(
    Pool: type[Processes | Pipes], start: str
) -> None:
    import multiprocessing

    pool = Pool(2, _echo, context=multiprocessing.get_context(start))
    try:
        jobs = [bytes([i]) * (JOB_BYTES * 3 + i) for i in range(6)]  # in memory files
        tickets = [pool.submit(job) for job in jobs] + [pool.submit(7)]
        assert [t.result() for t in tickets] == [*jobs, 7]
    finally:
        pool.close()


@pytest.mark.parametrize("when", ["waiting", "before-sending"])
def test_a_killed_worker_is_reported_while_waiting_or_sending(
    Pool: type[Processes | Pipes], when: str, tmp_path: Path
) -> None:
    pool = Pool(2, _echo)
    try:
        if when == "waiting":
            ticket = pool.submit(("sleep", 30, str(tmp_path)))
            _started(tmp_path, 1)
            os.kill(int(next(tmp_path.iterdir()).name), signal.SIGKILL)  # the one in the job
        else:  # every worker gone before the job is sent: the send fails
            for pid in pool.pids:
                os.kill(pid, signal.SIGKILL)
            for proc in pool._procs:
                proc.join(10)
            ticket = pool.submit(1)
        started = time.monotonic()
        with pytest.raises(WorkerCrashed, match="worker process died"):
            ticket.result()
        assert time.monotonic() - started < 10
        with pytest.raises(WorkerCrashed):  # and stays broken
            pool.submit(2).result()
    finally:
        pool.close()


def test_close_stops_the_workers_at_their_next_image(
    Pool: type[Processes | Pipes], tmp_path: Path
) -> None:
    pool = Pool(2, _echo)
    pids = pool.pids
    for _ in range(4):
        pool.submit(("sleep", 30, str(tmp_path)))
    _started(tmp_path, 2)
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 5  # not the 30 s a job takes
    assert not any(_alive(pid) for pid in pids)
    pool.close()  # twice: nothing
    with pytest.raises(Im2RecError, match="processes are closed"):
        pool.submit(1).result()


_PARENT_DIES = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from tests.executors.test_processes import _echo
from im2rec.executors.pipes import Pipes
from im2rec.executors.processes import Processes
pool = {"Processes": Processes, "Pipes": Pipes}[sys.argv[2]](2, _echo)
pool.submit(("sleep", 30))
print(*pool.pids, flush=True)
os._exit(0)  # as kill -9 would: close() never runs
"""


def test_workers_end_when_the_parent_dies_without_closing(Pool: type[Processes | Pipes]) -> None:
    root = str(Path(__file__).parents[2])
    run = subprocess.run(
        [sys.executable, "-c", _PARENT_DIES, root, Pool.__name__], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": root},
    )  # fmt: skip
    pids = [int(p) for p in run.stdout.split()]
    assert len(pids) == 2, run.stdout + run.stderr
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def test_many_jobs_in_flight_never_block_the_sender(Pool: type[Processes | Pipes]) -> None:
    """More jobs than the socket holds, while results wait unread: sending
    reads results meanwhile instead of waiting for workers that wait for
    it (a deadlock with a large prefetch_buffer)."""
    import threading

    pool = Pool(2, _echo)
    sizes: list[int] = []

    def run() -> None:
        tickets = [pool.submit(("big", 3 * _PART)) for _ in range(300)]
        sizes.extend(len(t.result()) for t in tickets)

    worker = threading.Thread(target=run, daemon=True)
    try:
        worker.start()
        worker.join(120)
        assert not worker.is_alive(), "submit() blocked while the workers waited for it"
        assert sizes == [3 * _PART] * 300
    finally:
        pool.close()  # (a blocked send then fails, and the thread ends)


def test_close_is_prompt_when_a_later_fork_holds_the_socket(Pool: type[Processes | Pipes]) -> None:
    """A process forked after the pool (a DataLoader worker) holds a copy of
    the parent's end: the idle workers must still see the pool close."""
    pool = Pool(2, _echo)
    assert pool.submit(1).result() == 1
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # holds every fd the parent had until told to go
        os.read(read, 1)
        os._exit(0)
    try:
        started = time.monotonic()
        pool.close()
        assert time.monotonic() - started < 3  # not the 10 s wait, then a kill
        assert [proc.exitcode for proc in pool._procs] == [0] * 2
    finally:
        os.write(write, b"x")
        os.waitpid(child, 0)


def test_a_result_waited_for_with_a_timeout_times_out_and_still_arrives(
    Pool: type[Processes | Pipes], tmp_path: Path
) -> None:
    from concurrent.futures import TimeoutError as FutureTimeout

    pool = Pool(1, _echo)
    try:
        ticket = pool.submit(("sleep", 0.5, str(tmp_path)))
        with pytest.raises(FutureTimeout):
            ticket.result(timeout=0.05)
        assert ticket.result(timeout=30) == pool.pids[0]
    finally:
        pool.close()


def test_a_job_no_worker_has_yet_is_cancelled(
    Pool: type[Processes | Pipes], tmp_path: Path
) -> None:
    """Cancel takes back a job still waiting in the parent (the pipe pool
    hands a job only to an idle worker; the socket pool, given a window,
    keeps that many on the socket); one a worker has is not cancelled, and
    its result still arrives, as for a future."""
    from concurrent.futures import CancelledError

    pool = Pool(1, _echo) if Pool is Pipes else Pool(1, _echo, window=1)
    try:
        running = pool.submit(("sleep", 0.3, str(tmp_path)))
        waiting = pool.submit(7)
        _started(tmp_path, 1)
        assert running.cancel() is False
        assert waiting.cancel() is True and waiting.cancel() is True
        with pytest.raises(CancelledError):
            waiting.result()
        if Pool is Processes:  # (without a window, a job is any worker's once sent)
            unbounded = Processes(1, _echo)
            try:
                sent = unbounded.submit(3)
                assert sent.cancel() is False and sent.result(timeout=30) == 3
            finally:
                unbounded.close()
        assert running.result(timeout=30) == pool.pids[0]
        assert pool.submit(8).result(timeout=30) == 8
    finally:
        pool.close()


def test_an_outcome_nobody_asks_for_is_not_kept(Pool: type[Processes | Pipes]) -> None:
    """A ticket dropped before its result was asked for: its outcome is
    dropped (it was kept for ever), whenever it comes."""
    import gc

    pool = Pool(2, _echo)
    try:
        tickets = [pool.submit(("big", 1 << 16)) for _ in range(6)]
        del tickets[1::2]
        gc.collect()
        assert [len(t.result(timeout=30)) for t in tickets] == [1 << 16] * 3
        deadline = time.monotonic() + 30
        while pool._dropped and time.monotonic() < deadline:  # (outcomes still on their way)
            assert pool.submit(1).result(timeout=30) == 1
        assert pool._done == {} and pool._dropped == set()
    finally:
        pool.close()
