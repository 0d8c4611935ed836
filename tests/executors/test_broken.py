"""Process pools whose worker died: a pool that cannot tell is ended, a broken
pool never hangs its shutdown or the interpreter's exit, and a healthy pool
left open does not hold the exit up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from im2rec.executors import LocalExecutor, WorkerCrashed

# Run in its own interpreter: a regression leaves the pool's reader thread
# stuck, and the interpreter would then hang at exit joining it.
_CLOSE_DURING_A_LARGE_RESULT = """
import threading, sys
from im2rec.executors import LocalExecutor

def big(_):
    return b"x" * (48 << 20)  # far more than a pipe holds: sent in many writes

if __name__ == "__main__":
    for _ in range(3):
        ex = LocalExecutor(2, chunk=1)
        results = ex.map_ordered(big, list(range(50)))
        next(results)  # the workers are now writing their next results
        closer = threading.Thread(target=ex.close, daemon=True)
        closer.start()
        closer.join(45)
        if closer.is_alive():
            print("close() hung")
            import os; os._exit(3)
    print("ok")
"""


# A worker that dies as the OOM killer can catch one: holding the result
# pipe's lock, part of a result written. Its own interpreter again.
_KILLED_WHILE_SENDING = """
import gc, os, signal, struct, sys, time
import multiprocessing.queues
from im2rec.executors import LocalExecutor, WorkerCrashed

def dies_sending(i):
    if i != 0:
        time.sleep(0.5)  # then waits for the lock the dead worker holds
        return i
    results = next(o for o in gc.get_objects() if type(o) is multiprocessing.queues.SimpleQueue)
    results._wlock.acquire()
    results._writer._send(struct.pack("!i", 1 << 20) + bytes(100))  # a length, then 100 of its bytes
    os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    ex = LocalExecutor(2, chunk=1)
    started = time.monotonic()
    try:
        list(ex.map_ordered(dies_sending, range(8)))
    except WorkerCrashed:
        ex.close()
        print("ok", round(time.monotonic() - started))
    else:
        print("no error")
"""


# Workers killed while the call queue's pipe is full of queued arguments:
# Python 3.10's pool then waits for ever for its feeder thread, in
# shutdown() and at the interpreter's exit (a CI run of the 3.10 suite
# hung there after every test had passed). Its own interpreter again.
_KILLED_WITH_A_FULL_CALL_QUEUE = """
import os, signal, sys, time
from im2rec.executors import LocalExecutor

def slow(arg):
    open(os.path.join(os.environ["MARKS"], str(os.getpid())), "w").close()  # started
    time.sleep(60)
    return len(arg)

if __name__ == "__main__":
    ex = LocalExecutor(2)
    futures = [ex.submit(slow, b"x" * (1 << 20)) for _ in range(8)]  # 8 MiB: the pipe is full
    deadline = time.monotonic() + 30
    while len(os.listdir(os.environ["MARKS"])) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # (both workers in a job: the rest of the calls queued)
    for pid in list(ex._pools["processes"]._processes):
        os.kill(pid, signal.SIGKILL)
    if sys.argv[1] == "close":  # before the pool has noticed
        ex.close()
    elif sys.argv[1] == "result":
        try:
            futures[0].result(timeout=30)
        except Exception as exc:
            print(type(exc).__name__)
    print("exiting")  # "exit": the pool is left for the interpreter's exit
"""


# The interpreter's exit beside a broken pool whose manager thread is still
# cleaning up: CPython's exit hook then wakes that thread through a pipe the
# thread is closing (check, then write: an OSError printed at exit). The
# cleanup is slowed here, so that it is still under way when
# the interpreter exits; a probe registered before im2rec's own hook runs
# after it, just before CPython's, and says whether the thread is done
# (with the pool still referenced, or already collected).
_EXIT_DURING_CLEANUP = """
import gc, os, signal, sys, threading, time
import concurrent.futures.process as cfp

clean_up = cfp._ExecutorManagerThread.join_executor_internals
def slow_clean_up(self):
    time.sleep(1.0)
    clean_up(self)
cfp._ExecutorManagerThread.join_executor_internals = slow_clean_up

def probe():
    running = [t for t in cfp._threads_wakeups if t.is_alive()]
    print("manager", "running" if running else "done")
threading._register_atexit(probe)

from im2rec.executors import LocalExecutor

def slow(_):
    open(os.path.join(os.environ["MARKS"], str(os.getpid())), "w").close()  # started
    time.sleep(60)

if __name__ == "__main__":
    ex = LocalExecutor(2)
    futures = [ex.submit(slow, 0) for _ in range(4)]
    deadline = time.monotonic() + 30
    while len(os.listdir(os.environ["MARKS"])) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    pool = ex._pools["processes"]
    for pid in list(pool._processes):
        os.kill(pid, signal.SIGKILL)
    try:
        futures[0].result(timeout=30)
    except Exception as exc:
        print(type(exc).__name__)
    if sys.argv[1] == "drop":  # the pool collected before the exit
        del ex, pool, futures
        gc.collect()
"""


_HEALTHY_POOL_LEFT_OPEN = """
from im2rec.executors import LocalExecutor

if __name__ == "__main__":
    ex = LocalExecutor(2)
    print(ex.submit(len, b"abc").result())  # and the pool is left to the exit
"""


def _die(_item: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


@pytest.mark.slow
def test_close_while_a_worker_is_sending_a_result_returns() -> None:
    """Killing a worker half-way through sending its result left the pool's
    reader thread waiting for the rest forever: a Ctrl-C that never came back
    (seen in CI as a ``rec pack --resize`` that ignored SIGINT)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    run = subprocess.run(
        [sys.executable, "-c", _CLOSE_DURING_A_LARGE_RESULT],
        capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout.split() == ["ok"], run.stdout + run.stderr


@pytest.mark.slow
def test_a_worker_killed_while_sending_a_result_ends_the_pool() -> None:
    """A worker SIGKILLed half-way through sending a result left the pool
    waiting for the rest for ever: `rec pack` hung after its worker was
    killed, about one run in five on a busy machine. The watchdog ends the
    pool a couple of seconds after the death instead."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    try:
        run = subprocess.run(
            [sys.executable, "-c", _KILLED_WHILE_SENDING],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the pool hung after a worker died while sending its result")
    words = run.stdout.split()
    assert run.returncode == 0 and words[:1] == ["ok"], run.stdout + run.stderr
    assert int(words[1]) <= 10, run.stdout  # about _GRACE seconds, not a timeout


@pytest.mark.parametrize("then", ["exit", "result", "close"])
@pytest.mark.slow
def test_killed_workers_with_queued_work_do_not_hang_the_exit(then: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), "MARKS": str(tmp_path)}
    try:
        run = subprocess.run(
            [sys.executable, "-c", _KILLED_WITH_A_FULL_CALL_QUEUE, then],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"the interpreter hung after its workers were killed ({then})")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split()[-1] == "exiting", run.stdout
    assert "Traceback" not in run.stderr, run.stderr
    if then == "result":
        assert run.stdout.split()[0] == "BrokenProcessPool", run.stdout


@pytest.mark.parametrize("pool", ["keep", "drop"])
@pytest.mark.slow
def test_the_exit_waits_for_a_broken_pools_cleanup(pool: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), "MARKS": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", _EXIT_DURING_CLEANUP, pool],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["BrokenProcessPool", "manager", "done"], run.stdout + run.stderr
    assert "Exception ignored" not in run.stderr and "Traceback" not in run.stderr, run.stderr


@pytest.mark.slow
def test_a_healthy_pool_left_open_does_not_hold_the_exit_up() -> None:
    """The exit waits for ending pools only: a healthy one is woken and
    shut down by CPython's own hook at once."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    begun = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", _HEALTHY_POOL_LEFT_OPEN],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    took = time.monotonic() - begun
    assert run.returncode == 0 and run.stdout.split()[0] == "3", run.stdout + run.stderr
    assert took < 4.0, f"the exit took {took:.1f} s (the ending pools' wait is 5 s)"


@pytest.mark.parametrize("io_bound", [False, True], ids=["processes", "threads"])
@pytest.mark.slow
def test_close_on_one_of_the_pools_own_threads(io_bound: bool) -> None:
    """An iterator's finaliser can run wherever the garbage collector runs,
    the pool's manager thread included: closing there must not try to wait
    for the thread it runs on."""
    import threading
    from concurrent.futures import Future

    executor = LocalExecutor(2)
    errors: list[BaseException] = []
    done = threading.Event()

    def close(_future: Future[int]) -> None:
        try:
            executor.close()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)
        finally:
            done.set()

    # still running when the callback is added: it runs on the pool's thread
    executor.submit(time.sleep, 0.5, io_bound=io_bound).add_done_callback(close)
    assert done.wait(60)
    assert errors == []


@pytest.mark.slow
def test_a_killed_worker_ends_the_pool_without_a_hang() -> None:
    """A worker killed mid-run is WorkerCrashed, and closing the executor
    returns: on Python 3.10 the broken pool's call-queue pipe is closed
    here (CPython gh-94777, which 3.11 fixes in the pool itself), so its
    feeder thread cannot stay blocked on a pipe that nobody reads."""
    executor = LocalExecutor(2, chunk=1)
    pool: Any = executor._get_pool("processes")
    with pytest.raises(WorkerCrashed, match="worker process died"):
        list(executor.map_ordered(_die, range(64)))
    if sys.version_info < (3, 11):
        assert pool._call_queue._reader.closed
    executor.close()
    assert pool._broken
