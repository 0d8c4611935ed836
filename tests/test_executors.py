"""LocalExecutor: stopping the process workers (what Ctrl-C runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from im2rec.executors import LocalExecutor

# Run in its own interpreter: a regression leaves the pool's reader thread
# stuck, and the interpreter would then hang at exit joining it.
_CLOSE_DURING_A_LARGE_RESULT = """
import threading, sys
from im2rec.executors import LocalExecutor

def big(_):
    return b"x" * (48 << 20)  # far more than a pipe holds: sent in many writes

if __name__ == "__main__":
    for _ in range(3):
        ex = LocalExecutor(2, chunk=1)
        results = ex.map_ordered(big, list(range(50)))
        next(results)  # the workers are now writing their next results
        closer = threading.Thread(target=ex.close, daemon=True)
        closer.start()
        closer.join(45)
        if closer.is_alive():
            print("close() hung")
            import os; os._exit(3)
    print("ok")
"""


def test_close_while_a_worker_is_sending_a_result_returns() -> None:
    """Killing a worker half-way through sending its result left the pool's
    reader thread waiting for the rest forever: a Ctrl-C that never came back
    (seen in CI as a ``rec pack --resize`` that ignored SIGINT)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    run = subprocess.run(
        [sys.executable, "-c", _CLOSE_DURING_A_LARGE_RESULT],
        capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout.split() == ["ok"], run.stdout + run.stderr


def _slow(path: str) -> None:
    with open(path, "a") as log:
        log.write("x")
    time.sleep(0.02)


def test_close_stops_each_worker_after_the_item_in_hand(tmp_path: Path) -> None:
    """After Ctrl-C the workers finish one image each, not their whole chunk."""
    log = tmp_path / "started"
    log.touch()
    ex = LocalExecutor(2, chunk=50)
    results = ex.map_ordered(_slow, [str(log)] * 400)
    next(results)  # chunks 1 and 2 are done (they ran side by side), 3 and 4 begun
    ex.close()
    started = len(log.read_text())
    # Finishing the chunks in hand would start 200 items; stopping, ~102.
    assert 100 <= started < 150, started
    results.close()
