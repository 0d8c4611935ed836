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
worker to stop after the item in hand. On Linux the worker processes are
:class:`~im2rec.executors.processes.Processes`: jobs and results travel as
whole messages on one socket, so a worker killed from outside (the OOM
killer, ``kill -9``) at any moment, even half-way through sending a
result, is reported as :class:`WorkerCrashed` and never waited for.
Elsewhere (macOS) they are :class:`~im2rec.executors.pipes.Pipes`, a pipe
a worker, with the same promise. A job no worker has yet can be
cancelled; an outcome nobody will ask for is dropped.

Its modules: :mod:`~im2rec.executors.local` (``LocalExecutor``),
:mod:`~im2rec.executors.processes` (the worker processes and their socket;
the pools' common part), :mod:`~im2rec.executors.pipes` (a pipe a worker),
:mod:`~im2rec.executors.worker` (a worker process's side: setup, stopping,
malloc).
"""

from .local import LocalExecutor, Outcome
from .worker import (
    WORKER_DIED,
    Stopped,
    WorkerCrashed,
    ask_to_stop,
    check_stop,
    check_workers,
    default_workers,
    fork_is_safe,
    init_worker,
    tune_malloc,
)

__all__ = [
    "WORKER_DIED",
    "LocalExecutor",
    "Outcome",
    "Stopped",
    "WorkerCrashed",
    "ask_to_stop",
    "check_stop",
    "check_workers",
    "default_workers",
    "fork_is_safe",
    "init_worker",
    "tune_malloc",
]
