"""Process pools whose worker died: CPython's ``ProcessPoolExecutor`` can
hang or misbehave there in ways its callers cannot fix, and this module
works around each one, where it is seen, with the reason.

- :func:`watch_pool`: a worker killed half-way through sending a result
  leaves the pool waiting for ever; a watchdog thread ends such a pool.
- :func:`unblock_broken`, :func:`shutdown`: Python 3.10's broken pool
  hangs its manager thread, its shutdown and the interpreter's exit.
- :func:`_settle_ending_pools`: at the interpreter's exit, CPython wakes
  a broken pool's manager thread while that thread closes the pipe it is
  woken through (an ``OSError`` printed at exit).
"""

from __future__ import annotations

import concurrent.futures.process  # noqa: F401  (its exit hook first: see the end)
import contextlib
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

__all__ = ["shutdown", "unblock_broken", "watch_pool", "workers_of"]


def _inside(pool: Executor) -> bool:
    """Whether this thread is one of ``pool``'s own: an owner's finaliser can
    run there (the garbage collector runs on any thread), and a pool cannot
    wait for the thread it is called on (``cannot join current thread``)."""
    me = threading.current_thread()
    return me is getattr(pool, "_executor_manager_thread", None) or me in getattr(
        pool, "_threads", ()
    )


def unblock_broken(pool: Executor, queue: Any = None) -> None:
    """Once a worker process is killed, Python 3.10's ProcessPoolExecutor can
    hang for ever: its call queue's feeder thread stays blocked writing to a
    pipe that nobody reads any more, and the pool's manager thread (which
    shutting down, and the interpreter's exit, wait for) joins that thread.
    Python 3.11 closes the pipe's read end in the broken pool (CPython
    gh-94777); this does the same on 3.10, so the blocked write fails and
    everything ends. This process never reads the call queue (only the
    workers do, through their own copies), so closing its end takes nothing
    from a worker still alive. ``queue``: the pool's call queue, for a pool
    that has already dropped it (``shutdown(wait=False)``)."""
    if sys.version_info >= (3, 11) or not getattr(pool, "_broken", False):
        return
    queue = queue if queue is not None else getattr(pool, "_call_queue", None)
    reader = getattr(queue, "_reader", None)
    if reader is not None:
        with contextlib.suppress(OSError):
            reader.close()


def shutdown(pool: Executor) -> None:
    """``pool.shutdown(cancel_futures=True)``, waiting for it unless called
    from one of the pool's own threads. On Python 3.10 a process pool may
    break while it shuts down (a worker that died just before, or one this
    shutdown stopped): the wait then unblocks it instead of waiting for ever."""
    wait = not _inside(pool)
    if sys.version_info >= (3, 11) or not wait or not isinstance(pool, ProcessPoolExecutor):
        pool.shutdown(wait=wait, cancel_futures=True)
        return
    manager = getattr(pool, "_executor_manager_thread", None)
    queue = getattr(pool, "_call_queue", None)
    results = getattr(pool, "_result_queue", None)
    pool.shutdown(wait=False, cancel_futures=True)  # flags the manager; drops its queues
    while manager is not None and manager.is_alive():
        unblock_broken(pool, queue)
        manager.join(0.1)
    if results is not None:
        results.close()  # what shutdown(wait=True) does once the manager has ended


def workers_of(processes: dict[int, Any] | None) -> list[Any]:
    """A pool's worker processes now (its dict changes under other threads)."""
    return list((processes or {}).values())


def _worker_died(workers: list[Any]) -> bool:
    return any(proc.exitcode is not None for proc in workers)


#: how long the pool's own manager gets to notice a dead worker before the
#: watchdog ends the pool (it notices within milliseconds when it is not stuck)
_GRACE = 2.0


def watch_pool(pool: ProcessPoolExecutor, done: threading.Event) -> None:
    """Ends a pool whose worker died while the pool cannot tell.

    A worker killed while it sends a result (it holds the result pipe's
    lock and has written part of a message) leaves the pool's manager
    thread reading the rest of that message for ever, and the other
    workers waiting for the lock: nothing is ever marked broken, and the
    caller waits on its futures for ever (``rec pack`` would hang when
    one of its workers is SIGKILLed at that moment).
    When a worker has been dead for :data:`_GRACE` seconds and the pool is
    still not broken, the other workers are killed and this process's end
    of the result pipe is closed: the manager thread's read then ends, and
    the pool fails every pending future with BrokenProcessPool as usual.
    """
    while not done.wait(0.25):
        if getattr(pool, "_broken", False):
            unblock_broken(pool)  # also when nobody closes it before the interpreter exits
            return
        if getattr(pool, "_shutdown_thread", False):
            return
        workers = workers_of(getattr(pool, "_processes", None))
        if not _worker_died(workers):
            continue
        if done.wait(_GRACE):
            return
        if getattr(pool, "_broken", False):
            continue  # noticed in time: the next pass unblocks it
        for proc in workers:
            if proc.exitcode is None:
                with contextlib.suppress(OSError):
                    proc.kill()
        writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.close()
        # and watch on: the manager now marks the pool broken, which on
        # Python 3.10 then needs unblocking


#: how long the interpreter's exit waits for pools' manager threads to end:
#: the watchdog's grace (a pool that could not tell a worker died) and then
#: the manager's own cleanup, which takes milliseconds
_EXIT_WAIT = _GRACE + 3.0


def _pool_of(manager: threading.Thread) -> Executor | None:
    """The pool a manager thread serves, while it has not been collected."""
    reference = getattr(manager, "executor_reference", None)
    return reference() if callable(reference) else None


def _ending(manager: threading.Thread) -> bool:
    """Whether a pool's manager thread is on its way out by itself: its pool
    is broken, was shut down without waiting or garbage-collected, or has a
    dead worker (which breaks it). A healthy pool's waits to be woken."""
    pool = _pool_of(manager)
    if pool is None or getattr(pool, "_broken", False) or getattr(pool, "_shutdown_thread", False):
        return True
    return _worker_died(workers_of(getattr(manager, "processes", None)))


def _settle_ending_pools() -> None:
    """At the interpreter's exit, just before ``concurrent.futures``' own
    hook: wait for each process pool's manager thread that is ending (see
    :func:`_ending`), for at most :data:`_EXIT_WAIT` seconds in all.

    CPython's hook (``process._python_exit``, 3.10 to 3.13) wakes every
    pool's manager thread without the pool's shutdown lock, while a
    manager thread that is ending closes that wake-up pipe, under the lock,
    as it cleans up: the check that the pipe is open and the write can
    straddle the close, and the exit then prints ``Exception ignored ...
    OSError: [Errno 9] Bad file descriptor``. A manager thread that has ended has
    closed its pipe, and the wake-up then writes nothing. The hook joins
    these threads itself right after, without a limit, so waiting here
    first only moves that wait earlier. Any pool's, not only im2rec's: the
    exit is the whole process's."""
    wakeups = getattr(concurrent.futures.process, "_threads_wakeups", None) or {}
    deadline = time.monotonic() + _EXIT_WAIT
    for manager in list(wakeups):
        if manager is threading.current_thread() or not manager.is_alive() or not _ending(manager):
            continue
        while manager.is_alive() and (left := deadline - time.monotonic()) > 0:
            pool = _pool_of(manager)
            if pool is not None:
                unblock_broken(pool)  # Python 3.10: its feeder thread may hold the manager up
            manager.join(min(0.1, left))


# threading runs its exit hooks newest first, and concurrent.futures.process
# (imported above) has registered its own: this one runs before it.
_register_atexit: Callable[[Callable[[], None]], None] | None = getattr(
    threading, "_register_atexit", None
)
if _register_atexit is not None:
    _register_atexit(_settle_ending_pools)
