"""LocalExecutor: per-item work inline, in a thread pool or in worker
processes, in input order (the package's docstring says why each)."""

from __future__ import annotations

import importlib
import itertools
import multiprocessing
import multiprocessing.context
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, Protocol, TypeVar

from . import processes
from .pipes import Pipes
from .processes import Processes
from .worker import (
    WORKER_DIED,
    WorkerCrashed,
    call_job,
    check_workers,
    fork_is_safe,
    run_chunk,
)

__all__ = ["WORKER_DIED", "LocalExecutor", "Outcome", "WorkerCrashed"]

T = TypeVar("T")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

Kind = Literal["threads", "processes"]


class Outcome(Protocol[R_co]):
    """What :meth:`LocalExecutor.submit` returns: a ``Future``, or a
    :class:`~im2rec.executors.processes.Ticket` (the same two methods)."""

    def result(self, timeout: float | None = None) -> R_co: ...

    def cancel(self) -> bool: ...


class LocalExecutor:
    """Runs ``fn`` over items on this machine, ``workers`` at a time.

    ``workers <= 1`` runs everything in the caller. Otherwise each call picks
    threads (``io_bound=True``) or processes; pools start on first use and
    are reused across calls. ``preload`` names modules the process workers
    need: imported once before the workers are forked (or in the fork
    server), so each worker starts in milliseconds. The processes are
    :class:`~im2rec.executors.processes.Processes` on Linux and
    :class:`~im2rec.executors.pipes.Pipes` elsewhere: on both a worker's
    death is reported, never waited for.
    """

    def __init__(
        self,
        workers: int,
        *,
        chunk: int = 16,
        preload: Sequence[str] = (),
        option: str = "--num-workers",
    ):
        if workers > 1:
            check_workers(workers, option)  # (ConfigError naming ``option``)
        self.workers = workers
        self.chunk = chunk
        self.preload = list(preload)
        self._threads: ThreadPoolExecutor | None = None
        self._processes: Processes | Pipes | None = None
        # this executor's threads' names: close() on one of them cannot wait for it
        self._prefix = f"im2rec-{id(self):x}"

    @property
    def pids(self) -> list[int]:
        """The process workers' ids, while they run (on Linux)."""
        return self._processes.pids if self._processes is not None else []

    def _get_threads(self) -> ThreadPoolExecutor:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.workers * 2, thread_name_prefix=self._prefix)
        return self._threads

    def _get_processes(self) -> Processes | Pipes:
        if self._processes is None:
            context = self._process_context()
            if processes.available():  # (one job more than workers on the socket: none idles)
                self._processes = Processes(
                    self.workers, call_job, context=context, crashed=WORKER_DIED,
                    window=self.workers + 1,
                )  # fmt: skip
            else:
                self._processes = Pipes(self.workers, call_job, context=context,
                                        crashed=WORKER_DIED)  # fmt: skip
        return self._processes

    def start(self, *, io_bound: bool = False) -> None:
        """Start the workers now (they import while the caller does its own
        setup) instead of at the first ``map_ordered``."""
        if self.workers <= 1:
            return
        if io_bound:
            self._get_threads()
        else:
            self._get_processes()

    def submit(self, fn: Callable[..., R], /, *args: Any, io_bound: bool = False) -> Outcome[R]:
        """``fn(*args)`` in a worker thread (``io_bound``) or process; the
        pool starts on first use. ``result()`` raises :class:`WorkerCrashed`
        if a worker process died."""
        if io_bound:
            return self._get_threads().submit(fn, *args)
        return self._submit_process(fn, *args)

    def _submit_process(self, fn: Callable[..., R], *args: Any) -> Outcome[R]:
        ticket: Outcome[R] = self._get_processes().submit((fn, args))
        return ticket

    def _process_context(self) -> multiprocessing.context.BaseContext:
        # fork is fastest (workers inherit the imported modules) but only safe
        # while this process has no other thread (the worker processes add
        # none). Otherwise use a fork server (with the modules preloaded
        # once), or spawn.
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
        size = 1 if io_bound else self.chunk
        # Every worker busy plus a couple of tasks queued: enough to never
        # starve, and memory stays at about (workers + 2) x chunk records.
        window = self.workers * 8 if io_bound else self.workers + 2
        pending: deque[Outcome[list[R]]] = deque()
        try:
            source = iter(items)
            while chunk := list(itertools.islice(source, size)):
                if io_bound:
                    pending.append(self._get_threads().submit(run_chunk, fn, chunk))
                else:
                    pending.append(self._submit_process(run_chunk, fn, chunk))
                if len(pending) >= window:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        except WorkerCrashed as exc:
            self._end_processes()  # broken: a later call starts new workers
            raise WorkerCrashed(WORKER_DIED) from exc
        finally:
            for outcome in pending:
                outcome.cancel()

    def _end_processes(self) -> None:
        pool, self._processes = self._processes, None
        if pool is not None:
            pool.close()

    def close(self) -> None:
        """Stop the workers; queued work is cancelled, and each process
        worker stops after the item in hand (after Ctrl-C, an image, not the
        rest of its chunk)."""
        self._end_processes()
        threads, self._threads = self._threads, None
        if threads is not None:
            inside = threading.current_thread().name.startswith(self._prefix + "_")
            threads.shutdown(wait=not inside, cancel_futures=True)

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
