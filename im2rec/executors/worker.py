"""The worker process's side: how many workers, whether they can be forked,
their setup (:func:`init_worker`), asking them to stop between items, and
keeping image-sized buffers on their heap (:func:`tune_malloc`)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import Im2RecError

__all__ = [
    "WORKER_DIED",
    "Stopped",
    "WorkerCrashed",
    "give_back_memory",
    "ask_to_stop",
    "check_stop",
    "check_workers",
    "default_workers",
    "fork_is_safe",
    "init_worker",
    "call_job",
    "run_chunk",
    "tune_malloc",
]


WORKER_DIED = "a worker process died (killed, out of memory, or a crash while decoding an image)"


class WorkerCrashed(Im2RecError):
    """A worker process died (killed, out of memory, crashed in a decoder)."""


def default_workers() -> int:
    """Usable CPUs (respecting affinity limits where Python sees them)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


#: workers a pool may have, at least, whatever the machine
MIN_WORKER_LIMIT = 64
#: and per usable CPU, where that is more
WORKERS_PER_CPU = 8


def check_workers(count: int, option: str = "--num-workers") -> int:
    """``count`` when this machine can run that many workers (processes, or
    threads that read): at least one, at most :data:`WORKERS_PER_CPU` per
    usable CPU or :data:`MIN_WORKER_LIMIT`, whichever is more (past a few
    per CPU they only take memory). ConfigError naming ``option``
    otherwise."""
    from ..errors import ConfigError

    cpus = default_workers()
    limit = max(MIN_WORKER_LIMIT, WORKERS_PER_CPU * cpus)
    if not 1 <= count <= limit:
        raise ConfigError(
            f"{option} {count:,}: this machine runs 1 to {limit:,} workers ({cpus:,} usable "
            f"CPUs; past {WORKERS_PER_CPU} a CPU they only take memory)"
        )
    return count


def fork_is_safe() -> bool:
    """Whether worker processes can be forked from this one: Linux, and no
    other thread that could hold a lock the child needs. The threads of our
    own pools (named ``im2rec…``: thread workers, a remote file's read-ahead)
    only wait on their own queues, which a new child never uses."""
    if sys.platform != "linux" or "fork" not in multiprocessing.get_all_start_methods():
        return False
    main = threading.main_thread()
    return all(t is main or _is_pool_thread(t) for t in threading.enumerate())


def _is_pool_thread(thread: threading.Thread) -> bool:
    return thread.name.startswith("im2rec")


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
    nothing): for worker processes that decode image after image, and for
    the block walk of ``rec info`` and ``rec verify``, which makes and frees
    a block's arrays block after block (page faults were 40% of
    ``rec verify --boxes``' time).

    glibc serves a block over its mmap threshold (128 KiB at start, raised
    by some frees, frozen by others and by ``MALLOC_TRIM_THRESHOLD_``, which
    Dask's nanny sets) with a fresh ``mmap``, and gives freed heap above its
    trim threshold back to the kernel; either way the next image's buffers
    (a 224x224 RGBX resize is 200 kB) fault their pages in again, a
    quarter of a training sample's time. Blocks up to 32 MiB then come from the heap,
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


def give_back_memory() -> None:
    """The heap freed so far given back to the kernel now (glibc's
    ``malloc_trim``; elsewhere nothing): for long jobs that free many
    heap-sized pieces while they build large arrays, whose freed pieces
    would otherwise stay in the process's memory. A few ms."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        return


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


def run_chunk(fn: Callable[[Any], Any], chunk: Sequence[Any]) -> list[Any]:
    results = []
    for item in chunk:
        check_stop()
        results.append(fn(item))
    return results


def call_job(job: tuple[Callable[..., Any], tuple[Any, ...]]) -> Any:
    """A :class:`~im2rec.executors.processes.Processes` job of
    :class:`~im2rec.executors.LocalExecutor`: ``fn(*args)``."""
    fn, args = job
    return fn(*args)
