"""Where per-item work runs: inline, in a thread pool, or in a process pool.

``map_ordered`` yields results in input order with at most a few tasks per
worker in flight, so memory stays bounded however fast the workers are.
Threads suit I/O (``--pass-through`` reads files; the GIL is released while
they wait) and Pillow, which releases the GIL while it decodes, resizes and
encodes; processes suit the rest of the per-image Python work on many cores.
Process workers ignore SIGINT: Ctrl-C is handled once, by the parent. A
worker that dies (out of memory, a crashing decoder) raises
:class:`WorkerCrashed` instead of hanging.

Stopping is asked, not forced: :meth:`LocalExecutor.close` signals each
worker to stop after the item in hand. Killing one instead could cut a
result off half-way through the pipe, and the pool's reader thread would
then wait forever for the rest of it (a Ctrl-C that never returns). A
worker killed from outside (the OOM killer, ``kill -9``) can do just that,
and the pool never notices; a watchdog thread per process pool does
(:func:`_watch_pool`).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal, TypeVar

from .errors import Im2RecError

__all__ = [
    "WORKER_DIED",
    "LocalExecutor",
    "Stopped",
    "WorkerCrashed",
    "ask_to_stop",
    "check_stop",
    "default_workers",
    "fork_is_safe",
    "init_worker",
    "tune_malloc",
]

T = TypeVar("T")
R = TypeVar("R")

Kind = Literal["threads", "processes"]


WORKER_DIED = "a worker process died (killed, out of memory, or a crash while decoding an image)"


class WorkerCrashed(Im2RecError):
    """A worker process died (killed, out of memory, crashed in a decoder)."""


def default_workers() -> int:
    """Usable CPUs (respecting affinity limits where Python sees them)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def fork_is_safe() -> bool:
    """Whether worker processes can be forked from this one: Linux, and no
    other thread that could hold a lock the child needs. The threads of our
    own pools (a process pool's manager and queue feeder, our thread
    workers) only wait on their own queues, which a new child never uses."""
    if sys.platform != "linux" or "fork" not in multiprocessing.get_all_start_methods():
        return False
    main = threading.main_thread()
    return all(t is main or _is_pool_thread(t) for t in threading.enumerate())


def _is_pool_thread(thread: threading.Thread) -> bool:
    kind = type(thread).__name__
    return (
        thread.name.startswith(("im2rec", "QueueFeederThread")) or kind == "_ExecutorManagerThread"
    )


def _parent_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:  # a killed, unreaped parent is a zombie
            return not any(line.startswith("State:") and "Z" in line for line in f)
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _watch_parent(pid: int) -> None:
    while _parent_alive(pid):
        time.sleep(0.5)
    os._exit(1)  # the parent was killed (kill -9): do not linger as an orphan


class Stopped(Exception):
    """Raised in a worker asked to stop; nobody waits for its result."""


_STOP = getattr(signal, "SIGUSR1", None)  # None on Windows: workers are terminated
_stop_asked = False


def _ask_stop(_signum: int, _frame: object) -> None:
    global _stop_asked
    _stop_asked = True


_MALLOC_TUNED = False


def tune_malloc() -> None:
    """Keep image-sized buffers on this process's heap (glibc; elsewhere
    nothing): for worker processes that decode image after image.

    glibc serves a block over its mmap threshold (128 KiB at start, raised
    by some frees, frozen by others and by ``MALLOC_TRIM_THRESHOLD_``, which
    Dask's nanny sets) with a fresh ``mmap``, and gives freed heap above its
    trim threshold back to the kernel; either way the next image's buffers
    (a 224x224 RGBX resize is 200 kB) fault their pages in again. Measured:
    ImageRecordIter's workers spent 0.40 ms an image on a 224-px
    random-resized crop without this and 0.31 ms with it, and Dask's
    packing ran 1.5x slower. Blocks up to 32 MiB then come from the heap,
    and up to 64 MiB of freed heap is kept. Inherited by forked children.
    """
    global _MALLOC_TUNED
    if _MALLOC_TUNED or not sys.platform.startswith("linux"):
        return
    _MALLOC_TUNED = True
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # from glibc's <malloc.h>
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 64 << 20)


def init_worker(parent: int) -> None:
    """Process workers: Ctrl-C is the parent's to handle, ``_STOP`` ends the
    work at the next item, and a worker exits by itself when the parent dies
    without shutting the pool down. Their heap keeps image-sized buffers
    (:func:`tune_malloc`)."""
    tune_malloc()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the CLI's handler a fork inherits
    if _STOP is not None:
        signal.signal(_STOP, _ask_stop)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def ask_to_stop(pid: int) -> None:
    """Ask worker process ``pid`` (set up by :func:`init_worker`) to stop at
    its next :func:`check_stop`; where there is no such signal, end it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, _STOP if _STOP is not None else signal.SIGTERM)


def check_stop() -> None:
    """Raise :class:`Stopped` in a worker that :meth:`LocalExecutor.close`
    asked to stop: long tasks call it between items (an image, not a whole
    batch, is then all that Ctrl-C waits for). Elsewhere, nothing."""
    if _stop_asked:
        raise Stopped


def _run_chunk(fn: Callable[[Any], Any], chunk: Sequence[Any]) -> list[Any]:
    results = []
    for item in chunk:
        check_stop()
        results.append(fn(item))
    return results


def _inside(pool: Executor) -> bool:
    """Whether this thread is one of ``pool``'s own: an owner's finaliser can
    run there (the garbage collector runs on any thread), and a pool cannot
    wait for the thread it is called on (``cannot join current thread``)."""
    me = threading.current_thread()
    return me is getattr(pool, "_executor_manager_thread", None) or me in getattr(
        pool, "_threads", ()
    )


def _unblock_broken(pool: Executor, queue: Any = None) -> None:
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


def _shutdown(pool: Executor) -> None:
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
        _unblock_broken(pool, queue)
        manager.join(0.1)
    if results is not None:
        results.close()  # what shutdown(wait=True) does once the manager has ended


#: how long the pool's own manager gets to notice a dead worker before the
#: watchdog ends the pool (it notices within milliseconds when it is not stuck)
_GRACE = 2.0


def _watch_pool(pool: ProcessPoolExecutor, done: threading.Event) -> None:
    """Ends a pool whose worker died while the pool cannot tell.

    A worker killed while it sends a result (it holds the result pipe's
    lock and has written part of a message) leaves the pool's manager
    thread reading the rest of that message for ever, and the other
    workers waiting for the lock: nothing is ever marked broken, and the
    caller waits on its futures for ever (seen as ``rec pack`` hanging
    after one worker was SIGKILLed, about 1 run in 5 on a busy machine).
    When a worker has been dead for :data:`_GRACE` seconds and the pool is
    still not broken, the other workers are killed and this process's end
    of the result pipe is closed: the manager thread's read then ends, and
    the pool fails every pending future with BrokenProcessPool as usual.
    """
    while not done.wait(0.25):
        if getattr(pool, "_broken", False):
            _unblock_broken(pool)  # also when nobody closes it before the interpreter exits
            return
        if getattr(pool, "_shutdown_thread", False):
            return
        workers = list((getattr(pool, "_processes", None) or {}).values())
        if not any(proc.exitcode is not None for proc in workers):
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


class LocalExecutor:
    """Runs ``fn`` over items on this machine, ``workers`` at a time.

    ``workers <= 1`` runs everything in the caller. Otherwise each call picks
    threads (``io_bound=True``) or processes; pools start on first use and
    are reused across calls. ``preload`` names modules the process workers
    need: imported once before the workers are forked (or in the fork
    server), so each worker starts in milliseconds.
    """

    def __init__(self, workers: int, *, chunk: int = 16, preload: Sequence[str] = ()):
        self.workers = workers
        self.chunk = chunk
        self.preload = list(preload)
        self._pools: dict[Kind, Executor] = {}
        self._watched = threading.Event()  # set: the watchdogs stop
        self._watchdog: threading.Thread | None = None

    def _watch(self, pool: Executor) -> None:
        """Start the process pool's watchdog once its workers exist (started
        earlier, it would be one more thread in the process they fork from)."""
        if self._watchdog is None and isinstance(pool, ProcessPoolExecutor):
            self._watchdog = threading.Thread(
                target=_watch_pool, args=(pool, self._watched), name="im2rec-watchdog", daemon=True
            )
            self._watchdog.start()

    def _get_pool(self, kind: Kind) -> Executor:
        pool = self._pools.get(kind)
        if pool is None:
            if kind == "threads":
                pool = ThreadPoolExecutor(self.workers * 2, thread_name_prefix="im2rec")
            else:
                pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=self._process_context(),
                    initializer=init_worker,
                    initargs=(os.getpid(),),
                )
            self._pools[kind] = pool
        return pool

    def start(self, *, io_bound: bool = False) -> None:
        """Start the workers now (they import while the caller does its own
        setup) instead of at the first ``map_ordered``."""
        if self.workers > 1:
            pool = self._get_pool("threads" if io_bound else "processes")
            for future in [pool.submit(int) for _ in range(self.workers)]:
                future.add_done_callback(lambda _f: None)
            self._watch(pool)

    def submit(self, fn: Callable[..., R], /, *args: Any, io_bound: bool = False) -> Future[R]:
        """``fn(*args)`` in a worker thread (``io_bound``) or process; the
        pool starts on first use. ``result()`` raises
        :class:`BrokenProcessPool` if a worker process died."""
        try:
            pool = self._get_pool("threads" if io_bound else "processes")
            future = pool.submit(fn, *args)
            self._watch(pool)
            return future
        except BrokenProcessPool as exc:
            # a worker died before this call noticed: report it where every
            # other death is reported, at result(), not from submit()
            failed: Future[R] = Future()
            failed.set_exception(exc)
            return failed

    def _process_context(self) -> multiprocessing.context.BaseContext:
        # fork is fastest (workers inherit the imported modules) but only safe
        # while this process has a single thread: ProcessPoolExecutor forks all
        # its workers before it starts its own manager thread. Otherwise use a
        # fork server (with the modules preloaded once), or spawn.
        methods = multiprocessing.get_all_start_methods()
        if fork_is_safe():
            for module in self.preload:  # imported once here, inherited by every worker
                importlib.import_module(module)
            return multiprocessing.get_context("fork")
        if "forkserver" in methods:
            ctx = multiprocessing.get_context("forkserver")
            if self.preload:
                ctx.set_forkserver_preload(self.preload)
            return ctx
        return multiprocessing.get_context("spawn")

    def map_ordered(
        self, fn: Callable[[T], R], items: Iterable[T], *, io_bound: bool = False
    ) -> Iterator[R]:
        """``map(fn, items)``, in order, computed by the workers; ``items`` is
        consumed as the workers need more (it may be a stream)."""
        if self.workers <= 1:
            yield from map(fn, items)
            return
        kind: Kind = "threads" if io_bound else "processes"
        pool = self._get_pool(kind)
        size = self.chunk if kind == "processes" else 1
        # Every worker busy plus a couple of tasks queued: enough to never
        # starve, and memory stays at about (workers + 2) x chunk records.
        window = self.workers + 2 if kind == "processes" else self.workers * 8
        pending: deque[Future[list[R]]] = deque()
        try:
            source = iter(items)
            while chunk := list(itertools.islice(source, size)):
                pending.append(pool.submit(_run_chunk, fn, chunk))
                self._watch(pool)
                if len(pending) >= window:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        except BrokenProcessPool as exc:
            _unblock_broken(pool)
            self._pools.pop(kind, None)
            if kind == "processes":  # its watchdog has returned; a new pool gets its own
                self._watchdog = None
            raise WorkerCrashed(WORKER_DIED) from exc
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        """Stop the workers; queued work is cancelled, and each process
        worker stops after the item in hand (after Ctrl-C, an image, not the
        rest of its chunk)."""
        pools, self._pools = self._pools, {}
        self._watched.set()  # workers stopping now are not deaths
        self._watched, self._watchdog = threading.Event(), None
        for pool in pools.values():
            if isinstance(pool, ProcessPoolExecutor):
                _unblock_broken(pool)
                for proc in list((getattr(pool, "_processes", None) or {}).values()):
                    if proc.pid is not None and proc.exitcode is None:
                        ask_to_stop(proc.pid)
            _shutdown(pool)

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
