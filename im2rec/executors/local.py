"""LocalExecutor: per-item work inline, in a thread pool or in a process
pool, in input order (the package's docstring says why each)."""

from __future__ import annotations

import importlib
import itertools
import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal, TypeVar

from ..errors import Im2RecError
from .broken import shutdown, unblock_broken, watch_pool, workers_of
from .worker import ask_to_stop, check_workers, fork_is_safe, init_worker, run_chunk

__all__ = ["WORKER_DIED", "LocalExecutor", "WorkerCrashed"]

T = TypeVar("T")
R = TypeVar("R")

Kind = Literal["threads", "processes"]


WORKER_DIED = "a worker process died (killed, out of memory, or a crash while decoding an image)"


class WorkerCrashed(Im2RecError):
    """A worker process died (killed, out of memory, crashed in a decoder)."""


class LocalExecutor:
    """Runs ``fn`` over items on this machine, ``workers`` at a time.

    ``workers <= 1`` runs everything in the caller. Otherwise each call picks
    threads (``io_bound=True``) or processes; pools start on first use and
    are reused across calls. ``preload`` names modules the process workers
    need: imported once before the workers are forked (or in the fork
    server), so each worker starts in milliseconds.
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
        self._pools: dict[Kind, Executor] = {}
        self._watched = threading.Event()  # set: the watchdogs stop
        self._watchdog: threading.Thread | None = None

    def _watch(self, pool: Executor) -> None:
        """Start the process pool's watchdog once its workers exist (started
        earlier, it would be one more thread in the process they fork from)."""
        if self._watchdog is None and isinstance(pool, ProcessPoolExecutor):
            self._watchdog = threading.Thread(
                target=watch_pool, args=(pool, self._watched), name="im2rec-watchdog", daemon=True
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
                pending.append(pool.submit(run_chunk, fn, chunk))
                self._watch(pool)
                if len(pending) >= window:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        except BrokenProcessPool as exc:
            unblock_broken(pool)
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
                unblock_broken(pool)
                for proc in workers_of(getattr(pool, "_processes", None)):
                    if proc.pid is not None and proc.exitcode is None:
                        ask_to_stop(proc.pid)
            shutdown(pool)

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
