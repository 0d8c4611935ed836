"""Worker processes on one pipe each: the pool where the socket pool
(:mod:`.processes`) cannot run (macOS: no ``SOCK_SEQPACKET`` pairs, no
memory files), with the same promise: a worker's death, at any moment,
is :class:`~im2rec.executors.WorkerCrashed`, and nothing waits for ever.

Each worker has its own duplex pipe, and the parent hands a job only to an
idle worker. No pipe is shared, so no lock is held across processes: a
worker that dies half-way through sending a result closes the only write
end of its pipe, and the parent's read of it ends (``EOFError``) instead
of waiting for the rest (what hangs CPython's ``ProcessPoolExecutor``,
whose workers share one result pipe under a lock). Jobs wait in the parent
until a worker is free, so a job not yet handed over can be cancelled.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import Im2RecError
from .processes import CRASHED, STOP_SIGNALS, Ticket, WorkerPool, _pickled, _unpickled
from .worker import Stopped, WorkerCrashed, init_worker

__all__ = ["Pipes"]

Connection = multiprocessing.connection.Connection


def _serve(conn: Connection, inherited: list[Connection], run: Callable[[Any], Any],
           mask: Any, parent: int) -> None:  # fmt: skip
    """A worker's loop: a job at a time from its pipe until the parent
    closes it; ``inherited``: the parent's ends a fork copied here (closed,
    so that the parent closing one is seen by its worker)."""
    for other in inherited:
        other.close()
    init_worker(parent)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a stop asked meanwhile lands now
    while True:
        try:
            key, job = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the parent closed its end: the pool is closed
            return
        try:
            outcome: tuple[bool, Any] = (True, run(job))
        except Stopped:
            return  # close() asked: nobody waits for this job
        except Exception as exc:  # noqa: BLE001 - the parent raises it
            outcome = (False, exc)
        try:
            conn.send_bytes(_pickled(outcome))
        except OSError:  # the parent has gone
            return


def _shut(conn: Connection) -> None:
    """End both directions of a duplex pipe (a socket pair where there is
    ``AF_UNIX``): its worker sees EOF even where a process forked later, a
    DataLoader worker, holds a copy of this end."""
    if not hasattr(socket, "AF_UNIX"):
        return
    with contextlib.suppress(OSError):
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.shutdown(socket.SHUT_RDWR)


class Pipes(WorkerPool):
    """``count`` worker processes running ``run(job)``, as
    :class:`~im2rec.executors.processes.Processes` (the same methods), on
    any platform with ``multiprocessing``."""

    def __init__(
        self,
        count: int,
        run: Callable[[Any], Any],
        *,
        context: Any = None,
        crashed: str = CRASHED,
    ) -> None:
        super().__init__()
        ctx = context or multiprocessing.get_context()
        forked = ctx.get_start_method() == "fork"
        has_mask = hasattr(signal, "pthread_sigmask")
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS) if has_mask else None
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        try:
            for _ in range(count):
                ours, theirs = ctx.Pipe(duplex=True)
                inherited = list(self._conns) + [ours] if forked else []
                proc = ctx.Process(target=_serve, args=(theirs, inherited, run, mask, os.getpid()),
                                   daemon=True, name="im2rec-worker")  # fmt: skip
                self._conns.append(ours)
                self._procs.append(proc)
                try:
                    proc.start()
                finally:
                    theirs.close()  # the worker's alone now: EOF once it is gone
        finally:
            if mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        self._crashed = crashed
        self._idle = deque(range(count))
        self._busy: dict[int, int] = {}  # worker -> the key of the job in its hands
        self._queued: dict[int, bytes] = {}  # key -> job, in submission order

    def submit(self, job: Any) -> Ticket[Any]:
        self._key += 1
        key = self._key
        if not self._broken and not self._closed:
            self._queued[key] = pickle.dumps((key, job), pickle.HIGHEST_PROTOCOL)
            self._hand_out()
        return Ticket(self, key)

    def cancel(self, key: int) -> bool:
        """Take job ``key`` back if it still waits for a worker (True)."""
        return self._queued.pop(key, None) is not None

    def _hand_out(self) -> None:
        """Give queued jobs to idle workers, oldest first."""
        while self._idle and self._queued:
            key = next(iter(self._queued))
            data = self._queued.pop(key, None)  # (a ticket dropped meanwhile took it back)
            if data is None:
                continue
            worker = self._idle.popleft()
            self._busy[worker] = key
            try:
                self._conns[worker].send_bytes(data)
            except OSError:  # it has died: said at result(), where every death is
                self._broken = True
                return

    def _receive(self, deadline: float | None) -> None:
        """Wait for the next result, or for a death."""
        if self._closed:
            raise Im2RecError("the worker processes are closed; start them again")
        if self._broken:
            raise WorkerCrashed(self._crashed)
        if not self._busy:  # (not a job of this pool's, or one given back)
            raise Im2RecError("no worker has that job: it was cancelled or never given")
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        conns = {self._conns[w]: w for w in self._busy}
        sentinels = {proc.sentinel: w for w, proc in enumerate(self._procs)}
        ready = multiprocessing.connection.wait([*conns, *sentinels], wait)
        if not ready:
            raise concurrent.futures.TimeoutError
        for got in ready:
            worker = conns.get(got)  # type: ignore[call-overload]
            if worker is None:  # a sentinel: a worker has ended
                self._broken = True
                raise WorkerCrashed(self._crashed)
            try:
                data = self._conns[worker].recv_bytes()
            except (EOFError, OSError):  # it died, maybe half-way through the result
                self._broken = True
                raise WorkerCrashed(self._crashed) from None
            key = self._busy.pop(worker)
            self._idle.append(worker)
            self._settle(key, _unpickled(data, key))
        self._hand_out()

    def close(self) -> None:
        """Stop the workers after the item in hand and wait for them (at
        most ``_STOP_WAIT`` seconds; then they are killed)."""
        if self._closed:
            return
        self._queued.clear()
        self._ask_to_stop()
        for conn in self._conns:  # workers waiting for a job see EOF
            _shut(conn)
            conn.close()
        self._join()
