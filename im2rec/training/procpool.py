"""ImageRecordIter's worker processes: forked once, fed through one socket.

Why not a ``ProcessPoolExecutor``: its manager and queue-feeder threads in
the training process cost that process's CPU for every batch (the threads
wake, take the GIL, pickle the augmenter again for every job), CPU the
workers do not get; and a process with
those threads is no longer safe to fork (a ``DataLoader`` started later).
Here the parent has no thread at all: it sends each job as one message on a
``SOCK_SEQPACKET`` socket pair whose other end every worker reads (the
kernel hands each message to exactly one of them, whole, so no lock is
needed and a worker killed while reading cannot leave half a message
behind), and reads the results from the same pair. The layout, the
augmenter and the ring's name are inherited when the workers are forked,
not sent for every batch.

A worker that dies (killed, out of memory, a crash in a decoder) is noticed
through its process sentinel while the parent waits, and reported as
:class:`~im2rec.executors.WorkerCrashed`; nothing waits for ever.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import select
import signal
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from ..errors import Im2RecError
from ..executors import Stopped, WorkerCrashed, ask_to_stop, init_worker

__all__ = ["JOB_BYTES", "BatchProcesses", "Ticket"]

#: the largest job message (one message a job: see the module's docstring);
#: the default socket buffer holds a message about twice this size
JOB_BYTES = 96 << 10
#: a result is sent in parts of at most this many bytes (each a message)
_PART = 32 << 10
_HEAD = struct.Struct("<qII")  # job key, part, parts
#: the signal ask_to_stop sends (SIGUSR1 where there is one)
STOP_SIGNALS = {getattr(signal, "SIGUSR1", signal.SIGTERM)}
#: how long close() waits for a worker to finish the image in hand
_STOP_WAIT = 10.0

CRASHED = (
    "an ImageRecordIter worker process died (killed, out of memory, or a crash "
    "while decoding); create the iterator again"
)


class Ticket:
    """A job sent to the workers; :meth:`result` waits for its outcome (the
    :class:`concurrent.futures.Future` methods the iterator uses)."""

    __slots__ = ("_key", "_pool")

    def __init__(self, pool: BatchProcesses, key: int) -> None:
        self._pool, self._key = pool, key

    def result(self) -> Any:
        return self._pool.result(self._key)

    def cancel(self) -> bool:
        return False  # sent: a worker may already be writing into its slot


def _serve(
    sock: socket.socket, parent_end: socket.socket, run: Callable[[Any], Any], mask: Any
) -> None:
    """A worker's loop: one job a message until the parent closes its end;
    ``mask``: the signal mask to restore once the stop handler is set."""
    parent_end.close()  # (inherited) so that the parent closing its own end is seen here
    init_worker(os.getppid())
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a stop asked meanwhile lands now
    while True:
        try:
            message = sock.recv(JOB_BYTES)
        except OSError:
            return
        if not message:  # the parent closed its end: the pool is closed
            return
        key, job = pickle.loads(message)
        try:
            outcome: tuple[bool, Any] = (True, run(job))
        except Stopped:
            return  # close() asked: nobody waits for this job
        except Exception as exc:  # noqa: BLE001 - the parent raises it
            outcome = (False, exc)
        try:
            data = pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - something that does not pickle
            what = exc if outcome[0] else outcome[1]  # (an error's own message, if it was one)
            data = pickle.dumps((False, Im2RecError(f"{type(what).__name__}: {what}")))
        parts = max(1, -(-len(data) // _PART))
        try:
            for part in range(parts):
                chunk = data[part * _PART : (part + 1) * _PART]
                sock.send(_HEAD.pack(key, part, parts) + chunk)
        except OSError:  # the parent has gone
            return


class BatchProcesses:
    """``count`` forked processes running ``run(job)``; ``run`` and what it
    refers to are inherited, jobs and results are pickled. Linux only
    (``SOCK_SEQPACKET`` and fork): the caller checks
    :func:`~im2rec.executors.fork_is_safe` first."""

    def __init__(self, count: int, run: Callable[[Any], Any]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The stop signal is held until a worker has its handler: close()
        # right after the start would otherwise kill one with it.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        ctx = multiprocessing.get_context("fork")
        self._procs = [
            ctx.Process(
                target=_serve, args=(theirs, ours, run, mask), daemon=True, name="im2rec-batch"
            )
            for _ in range(count)
        ]
        try:
            for proc in self._procs:
                proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            theirs.close()  # the workers hold it now: EOF or EPIPE once they are all gone
        self._sock = ours
        # registered once (multiprocessing.connection.wait builds a selector
        # each call: a sixth of the training process's CPU time, profiled)
        self._poll = select.poll()
        for fd in (ours.fileno(), *(proc.sentinel for proc in self._procs)):
            self._poll.register(fd, select.POLLIN)
        self._key = 0
        self._done: dict[int, tuple[bool, Any]] = {}
        self._parts: dict[int, list[bytes]] = {}
        self._broken = False
        self._closed = False

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._procs if proc.pid is not None]

    def submit(self, job: Any) -> Ticket:
        self._key += 1
        key = self._key
        if not self._broken and not self._closed:
            message = pickle.dumps((key, job), pickle.HIGHEST_PROTOCOL)
            if len(message) > JOB_BYTES:  # the caller sizes jobs below this
                raise Im2RecError(f"a batch job of {len(message):,} bytes is too large to send")
            self._send(message)
        return Ticket(self, key)

    def _send(self, message: bytes) -> None:
        """Send a job without ever blocking on it: with many batches in
        flight the socket's buffer can fill while the workers wait to send
        results nobody reads yet, so results are read meanwhile. A death is
        reported at ``result()``, where every other death is."""
        while True:
            try:
                self._sock.send(message, socket.MSG_DONTWAIT)
                return
            except BlockingIOError:
                pass
            except OSError:  # every worker has gone
                self._broken = True
                return
            fd = self._sock.fileno()
            sentinels = [proc.sentinel for proc in self._procs]
            readable, writable, _ = select.select([fd, *sentinels], [fd], [])
            if writable:
                continue
            if fd not in readable:  # a worker has ended
                self._broken = True
                return
            self._read()

    def result(self, key: int) -> Any:
        """The outcome of job ``key``: its value, or its exception raised."""
        while key not in self._done:
            self._receive()
        ok, value = self._done.pop(key)
        if not ok:
            raise value
        return value

    def _receive(self) -> None:
        """Wait for the next message (a part of a result), or for a death."""
        if self._closed:
            raise Im2RecError("the ImageRecordIter's workers are closed; create the iterator again")
        if self._broken:
            raise WorkerCrashed(CRASHED)
        ready = {fd for fd, _ in self._poll.poll()}
        if self._sock.fileno() not in ready:  # a worker has ended, and nothing was sent
            self._broken = True
            raise WorkerCrashed(CRASHED)
        if not self._read():
            raise WorkerCrashed(CRASHED)

    def _read(self) -> bool:
        """Read one message that is waiting; False (and broken) at EOF."""
        try:
            message = self._sock.recv(_HEAD.size + _PART)
        except OSError:  # (ECONNRESET: every worker has gone, a job unread)
            message = b""
        if len(message) < _HEAD.size:  # EOF: every worker has gone
            self._broken = True
            return False
        key, part, parts = _HEAD.unpack_from(message)
        got = self._parts.setdefault(key, [])
        got.append(message[_HEAD.size :])
        if part + 1 == parts:  # one worker sends a result's parts in order
            del self._parts[key]
            self._done[key] = pickle.loads(b"".join(got))
        return True

    def close(self) -> None:
        """Stop the workers after the image in hand and wait for them."""
        if self._closed:
            return
        self._closed = True
        for proc in self._procs:
            if proc.pid is not None and proc.exitcode is None:
                ask_to_stop(proc.pid)
        # workers waiting for a job see EOF (shutdown: even where a process
        # forked later, a DataLoader worker, holds a copy of this end)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        deadline = time.monotonic() + _STOP_WAIT
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.exitcode is None:
                with contextlib.suppress(OSError):
                    proc.kill()
                proc.join(1.0)
