"""LocalExecutor: stopping the process workers (what Ctrl-C runs)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from im2rec.executors import LocalExecutor


def _slow(path: str) -> None:
    with open(path, "a") as log:
        log.write("x")
    time.sleep(0.02)


@pytest.mark.slow
def test_close_stops_each_worker_after_the_item_in_hand(tmp_path: Path) -> None:
    """After Ctrl-C the workers finish one image each, not their whole chunk."""
    log = tmp_path / "started"
    log.touch()
    ex = LocalExecutor(2, chunk=50)
    results = ex.map_ordered(_slow, [str(log)] * 400)
    next(results)  # chunk 1 is done; chunk 2 ran beside it (a loaded CI machine saw it
    # one item short of done), chunk 3 may have begun
    ex.close()
    started = len(log.read_text())
    # Finishing the chunks in hand would start 200 items; stopping, about 100.
    assert 50 <= started < 150, started
    results.close()


def _die_on_three(item: int) -> int:
    import os
    import signal

    if item == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return item * 2


@pytest.mark.slow
def test_where_the_socket_pool_is_missing_the_pipe_pool_does_the_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(macOS has no SOCK_SEQPACKET pairs: LocalExecutor then runs on
    Pipes, a pipe a worker, which keeps the same promise.)"""
    from im2rec.executors import WorkerCrashed, processes
    from im2rec.executors.pipes import Pipes

    monkeypatch.setattr(processes, "available", lambda: False)
    with LocalExecutor(2, chunk=2) as ex:
        assert list(ex.map_ordered(abs, range(-6, 0))) == [6, 5, 4, 3, 2, 1]
        assert isinstance(ex._processes, Pipes) and len(ex.pids) == 2
        assert ex.submit(abs, -7).result() == 7
        with pytest.raises(WorkerCrashed, match="worker process died"):
            list(ex.map_ordered(_die_on_three, range(8)))
        assert ex.pids == []  # ended; the next call starts new workers
        assert list(ex.map_ordered(abs, range(-2, 0))) == [2, 1]
