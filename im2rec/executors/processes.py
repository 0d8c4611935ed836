"""Worker processes fed through one socket, that a worker's death cannot hang.

Every pool that sends results through a pipe under a lock
(``concurrent.futures.ProcessPoolExecutor``, ``multiprocessing.Pool``, loky,
pebble: noxdafox/pebble#163) waits for ever when a worker dies holding that
lock with part of a result written: the OOM killer, ``kill -9``, or a
decoder crashing on a hostile image, mid-send. (CPython's pool is checked
to still hang there by ``tests/executors/test_broken.py`` on every Python
CI runs; loky 3.7 hangs the same way.) This pool has no lock to die
holding: jobs and results are messages on one ``SOCK_SEQPACKET`` socket
pair, which the kernel delivers whole or not at all, each job to exactly
one worker, and a dead worker is seen through its process sentinel. The
parent has no thread of its own (so a process with a pool can still fork a
``DataLoader`` later, and no thread takes the training process's CPU for
every batch).

A job travels in its message when it pickles to at most ``JOB_BYTES``, else
in a sealed-off memory file passed with the message (``SCM_RIGHTS``), so it
still reaches one worker whole; a result is sent in parts of ``_PART``
bytes, each its own message. ``run`` (and what it refers to) is inherited
where the workers are forked, and pickled once to each worker otherwise.
Linux only (:func:`available`).

A worker that dies (killed, out of memory, a crash in a decoder) is noticed
through its process sentinel while the parent waits, and reported as
:class:`~im2rec.executors.WorkerCrashed`; nothing waits for ever.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import pickle
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ..errors import Im2RecError
from .worker import Stopped, WorkerCrashed, ask_to_stop, init_worker

__all__ = ["JOB_BYTES", "Processes", "Ticket", "WorkerPool", "available"]

R = TypeVar("R")

#: the largest job sent in its message; a larger one goes in a memory file
#: passed with the message (the default socket buffer holds about twice this)
JOB_BYTES = 96 << 10
#: a result is sent in parts of at most this many bytes (each a message)
_PART = 32 << 10
_HEAD = struct.Struct("<qII")  # job key, part, parts
_INLINE, _IN_FILE = b"I", b"F"  # a job message's first byte: the job follows, or is in the fd
#: the signal ask_to_stop sends (SIGUSR1 where there is one)
STOP_SIGNALS = {getattr(signal, "SIGUSR1", signal.SIGTERM)}
#: how long close() waits for a worker to finish the item in hand
_STOP_WAIT = 10.0

CRASHED = "a worker process died (killed, out of memory, or a crash while decoding an image)"


def available() -> bool:
    """Whether this system has what the pool needs (Linux: ``SOCK_SEQPACKET``
    socket pairs, file descriptors passed with a message, memory files)."""
    return (
        sys.platform == "linux"
        and hasattr(socket, "SOCK_SEQPACKET")
        and hasattr(socket, "recv_fds")
        and hasattr(os, "memfd_create")
    )


class Ticket(Generic[R]):
    """A job given to a pool; :meth:`result` waits for its outcome and, as
    a :class:`concurrent.futures.Future` does, gives the same outcome every
    time it is asked. A ticket dropped before its outcome was asked for
    tells the pool, which then drops the outcome (nothing accumulates)."""

    __slots__ = ("_key", "_outcome", "_pool")

    def __init__(self, pool: WorkerPool, key: int) -> None:
        self._pool, self._key = pool, key
        self._outcome: tuple[bool, Any] | None = None

    def result(self, timeout: float | None = None) -> R:
        if self._outcome is None:
            self._outcome = self._pool.outcome(self._key, timeout)
        ok, value = self._outcome
        if not ok:
            raise value
        result: R = value
        return result

    def cancel(self) -> bool:
        """True when the job will never run (no worker had it yet); its
        :meth:`result` then raises ``concurrent.futures.CancelledError``.
        False when a worker has it or it is done, as for a future."""
        if self._outcome is None and self._pool.cancel(self._key):
            self._outcome = (False, concurrent.futures.CancelledError())
        return self._outcome is not None and isinstance(
            self._outcome[1], concurrent.futures.CancelledError
        )

    def __del__(self) -> None:
        if getattr(self, "_outcome", True) is None:
            try:
                self._pool.forget(self._key)
            except Exception:  # noqa: BLE001 - (at the interpreter's exit)
                pass


class WorkerPool:
    """What both pools share: the workers, the outcomes waiting to be
    asked for, a death's report, and the end (:meth:`close` asks the
    workers to stop after the item in hand, then kills those that do not
    within ``_STOP_WAIT`` seconds)."""

    _procs: list[Any]
    _crashed: str

    def __init__(self) -> None:
        self._key = 0
        self._done: dict[int, tuple[bool, Any]] = {}
        self._dropped: set[int] = set()  # keys whose outcome nobody will ask for
        self._broken = False
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The workers' process ids."""
        return [proc.pid for proc in self._procs if proc.pid is not None]

    @property
    def broken(self) -> bool:
        """Whether a worker has died (every later result raises)."""
        return self._broken

    def outcome(self, key: int, timeout: float | None = None) -> tuple[bool, Any]:
        """The outcome of job ``key``, ``(True, value)`` or ``(False,
        exception)``, handed over once (its :class:`Ticket` keeps it);
        ``concurrent.futures.TimeoutError`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while key not in self._done:
            self._receive(deadline)
        return self._done.pop(key)

    def _settle(self, key: int, outcome: tuple[bool, Any]) -> None:
        """Keep a job's outcome for its ticket, unless the ticket is gone."""
        if key in self._dropped:
            self._dropped.discard(key)
        else:
            self._done[key] = outcome

    def cancel(self, key: int) -> bool:
        """Take job ``key`` back if no worker has it yet (True)."""
        return False

    def forget(self, key: int) -> None:
        """Nobody will ask for job ``key``'s outcome: drop it (now, or when
        it comes), and do not run the job if no worker has it yet."""
        if self._done.pop(key, None) is None and not self.cancel(key):
            self._dropped.add(key)

    def _receive(self, deadline: float | None) -> None:
        raise NotImplementedError

    def _ask_to_stop(self) -> None:
        self._closed = True
        for proc in self._procs:
            if proc.pid is not None and proc.exitcode is None:
                ask_to_stop(proc.pid)

    def _join(self) -> None:
        deadline = time.monotonic() + _STOP_WAIT
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.exitcode is None:
                with contextlib.suppress(OSError):
                    proc.kill()
                proc.join(1.0)


def _rights(fd: int | None) -> list[tuple[int, int, bytes]]:
    """The ancillary data that passes ``fd`` with a message (none for None)."""
    return [] if fd is None else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))]


def _job_of(message: bytes, fds: list[int]) -> Any:
    """The ``(key, job)`` a job message carries, in it or in its memory file."""
    try:
        if message[:1] == _IN_FILE and fds:
            size = os.fstat(fds[0]).st_size
            return pickle.loads(os.pread(fds[0], size, 0))
        return pickle.loads(message[1:])
    finally:
        for fd in fds:
            os.close(fd)


def _serve(
    sock: socket.socket,
    parent_end: socket.socket | None,
    run: Callable[[Any], Any],
    mask: Any,
    parent: int,
) -> None:
    """A worker's loop: one job a message until the parent closes its end;
    ``mask``: the signal mask to restore once the stop handler is set."""
    if parent_end is not None:  # (inherited by a fork) so that the parent closing it is seen
        parent_end.close()
    init_worker(parent)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a stop asked meanwhile lands now
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(sock, JOB_BYTES + 1, 1)
        except OSError:
            return
        if not message:  # the parent closed its end: the pool is closed
            return
        key, job = _job_of(message, fds)
        try:
            outcome: tuple[bool, Any] = (True, run(job))
        except Stopped:
            return  # close() asked: nobody waits for this job
        except Exception as exc:  # noqa: BLE001 - the parent raises it
            outcome = (False, exc)
        data = _pickled(outcome)
        parts = max(1, -(-len(data) // _PART))
        try:
            for part in range(parts):
                chunk = data[part * _PART : (part + 1) * _PART]
                sock.send(_HEAD.pack(key, part, parts) + chunk)
        except OSError:  # the parent has gone
            return


def _pickled(outcome: tuple[bool, Any]) -> bytes:
    """A job's outcome as the parent will read it. An exception that does
    not pickle, or pickles but does not unpickle (its ``__init__`` takes
    other arguments than its ``args``: common in third-party code), is sent
    as an :class:`Im2RecError` with its type and message, so the parent
    always reads the outcome of the job it asked for."""
    try:
        data = pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
        if not outcome[0]:
            pickle.loads(data)  # (an error is rare: checking it costs nothing that counts)
        return data
    except Exception as exc:  # noqa: BLE001 - whatever pickling raises
        what = outcome[1] if not outcome[0] else exc  # (an error's own message, if it was one)
        return pickle.dumps((False, Im2RecError(f"{type(what).__name__}: {what}")))


def _unpickled(data: bytes, key: int) -> tuple[bool, Any]:
    """A result's outcome; one that does not unpickle here (a value whose
    class the parent cannot rebuild) is that job's error, never another
    job's, and never a lost outcome that a ``result()`` waits on for ever."""
    try:
        outcome = pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - whatever unpickling raises
        return False, Im2RecError(f"job {key}'s result does not unpickle here: {exc!r}")
    if not (isinstance(outcome, tuple) and len(outcome) == 2):
        return False, Im2RecError(f"job {key}'s result is not an outcome")
    return outcome[0] is True, outcome[1]


class Processes(WorkerPool):
    """``count`` worker processes running ``run(job)``; jobs and results are
    pickled. ``context``: how they start (fork, where the caller has checked
    :func:`~im2rec.executors.fork_is_safe`, or a fork server or spawn);
    ``crashed``: the message of the :class:`WorkerCrashed` a death raises.
    Linux only (:func:`available`)."""

    def __init__(
        self,
        count: int,
        run: Callable[[Any], Any],
        *,
        context: Any = None,
        crashed: str = CRASHED,
        window: int | None = None,
    ) -> None:
        super().__init__()
        ctx = context or multiprocessing.get_context("fork")
        forked = ctx.get_start_method() == "fork"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The stop signal is held until a worker has its handler: close()
        # right after the start would otherwise kill one with it.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        args = (theirs, ours if forked else None, run, mask, os.getpid())
        self._procs = [
            ctx.Process(target=_serve, args=args, daemon=True, name="im2rec-worker")
            for _ in range(count)
        ]
        try:
            for proc in self._procs:
                proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            theirs.close()  # the workers hold it now: EOF or EPIPE once they are all gone
        self._sock = ours
        self._crashed = crashed
        # registered once: multiprocessing.connection.wait builds a selector
        # each call (docs/measured.md)
        self._poll = select.poll()
        for fd in (ours.fileno(), *(proc.sentinel for proc in self._procs)):
            self._poll.register(fd, select.POLLIN)
        self._parts: dict[int, list[bytes]] = {}
        # With a window, at most that many jobs are on the socket or in a
        # worker's hands; the rest wait here, where they can be cancelled.
        self._window = window
        self._in_flight = 0
        self._queued: dict[int, bytes] = {}

    def submit(self, job: Any) -> Ticket[Any]:
        self._key += 1
        key = self._key
        if not self._broken and not self._closed:
            data = pickle.dumps((key, job), pickle.HIGHEST_PROTOCOL)
            if self._window is not None and (self._queued or self._in_flight >= self._window):
                self._queued[key] = data
            else:
                self._dispatch(data)
        return Ticket(self, key)

    def cancel(self, key: int) -> bool:
        """Take job ``key`` back if it still waits here (True); one on the
        socket is any worker's, and cannot be."""
        return self._queued.pop(key, None) is not None

    def _hand_out(self) -> None:
        """Send waiting jobs, oldest first, while the window has room."""
        while self._queued and not self._broken and self._in_flight < (self._window or 0):
            key = next(iter(self._queued))
            data = self._queued.pop(key, None)  # (a ticket dropped meanwhile took it back)
            if data is not None:
                self._dispatch(data)

    def _dispatch(self, data: bytes) -> None:
        self._in_flight += 1
        if len(data) < JOB_BYTES:
            self._send(_INLINE + data, None)
            return
        fd = os.memfd_create("im2rec-job", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            self._send(_IN_FILE, fd)
        finally:
            os.close(fd)  # (the message holds its own reference)

    def _send(self, message: bytes, fd: int | None) -> None:
        """Send a job without ever blocking on it: with many jobs in flight
        the socket's buffer can fill while the workers wait to send results
        nobody reads yet, so results are read meanwhile. A death is
        reported at ``result()``, where every other death is."""
        while True:
            try:
                # (sendmsg: socket.send_fds ignores its flags, to 3.13 at least)
                self._sock.sendmsg([message], _rights(fd), socket.MSG_DONTWAIT)
                return
            except BlockingIOError:
                pass
            except OSError:  # every worker has gone
                self._broken = True
                return
            sock = self._sock.fileno()
            sentinels = [proc.sentinel for proc in self._procs]
            readable, writable, _ = select.select([sock, *sentinels], [sock], [])
            if writable:
                continue
            if sock not in readable:  # a worker has ended
                self._broken = True
                return
            self._read()

    def _receive(self, deadline: float | None) -> None:
        """Wait for the next message (a part of a result), or for a death."""
        if self._closed:
            raise Im2RecError("the worker processes are closed; start them again")
        if self._broken:
            raise WorkerCrashed(self._crashed)
        self._hand_out()
        wait = None if deadline is None else max(0, round(1000 * (deadline - time.monotonic())))
        ready = {fd for fd, _ in self._poll.poll(wait)}
        if not ready:
            raise concurrent.futures.TimeoutError
        if self._sock.fileno() not in ready:  # a worker has ended, and nothing was sent
            self._broken = True
            raise WorkerCrashed(self._crashed)
        if not self._read():
            raise WorkerCrashed(self._crashed)

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
            self._in_flight -= 1
            self._settle(key, _unpickled(b"".join(got), key))
        return True

    def close(self) -> None:
        """Stop the workers after the item in hand and wait for them (at
        most ``_STOP_WAIT`` seconds; then they are killed)."""
        if self._closed:
            return
        self._queued.clear()
        self._ask_to_stop()
        # workers waiting for a job see EOF (shutdown: even where a process
        # forked later, a DataLoader worker, holds a copy of this end)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._join()
