"""Where shards run: this machine's process pool, or a Dask cluster.

Both runners call the same :func:`~im2rec.packing.sharding.pack_shard`, so a shard's
bytes do not depend on where it ran. On Dask each shard is one task, retried
when its worker dies (it restarts from scratch in a fresh staging folder), and
every worker must see the image root and the output folder at the same paths
(a shared filesystem): :meth:`DaskRunner.check` asks each worker before any
work starts. Workers report progress as Dask events, throttled to two a second
per shard.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DatasetError, Im2RecError
from ..executors import LocalExecutor, check_workers, tune_malloc
from ..storage import is_url
from ..storage.atomic import create_output
from . import PackInterrupted
from .sharding import RunHooks
from .shards import ShardResult, ShardSpec, pack_shard

__all__ = ["DaskRunner", "LocalRunner", "require_dask"]

TOPIC = "im2rec-pack-progress"
PASS_THROUGH_THREADS = 4  # file reads inside one Dask task wait on I/O: overlap a few


class LocalRunner:
    """Shards one after another, each spread over the local worker pool."""

    def __init__(self, executor: LocalExecutor):
        self.executor = executor

    def check(self, root: str, sample: str, out_dir: str) -> None:
        """Nothing to ask: this process already found the root."""

    def run(self, specs: Sequence[ShardSpec], hooks: RunHooks) -> None:
        for spec in specs:

            def progress(done: int, _total: int, nbytes: int, index: int = spec.index) -> None:
                hooks.on_progress(index, done, nbytes)

            result = pack_shard(
                spec, executor=self.executor, resume=hooks.resume, on_progress=progress
            )
            result.worker = "" if result.skipped else "local"
            hooks.on_result(result)


class DaskRunner:
    """Shards as tasks on a Dask cluster: the scheduler at ``address``, or a
    ``LocalCluster`` of ``workers`` single-threaded processes."""

    def __init__(
        self,
        address: str | None = None,
        *,
        workers: int = 2,
        retries: int = 2,
        timeout: str = "10s",
    ):
        distributed = require_dask()
        self.retries = retries
        self.cluster: Any = None
        if address:
            try:
                self.client = distributed.Client(address, timeout=timeout)
            except (OSError, TimeoutError) as exc:
                raise Im2RecError(
                    f"cannot reach the Dask scheduler at {address}: {exc}; start one "
                    "(`dask scheduler`, then `dask worker ADDRESS` on each machine) or drop "
                    "--scheduler for a local cluster"
                ) from None
        else:
            check_workers(workers)
            self.cluster = distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True,
                # a free port: a second cluster on the machine (another run, a
                # test in another process) would find the default 8787 taken
                dashboard_address=":0", silence_logs=logging.ERROR,
            )  # fmt: skip
            self.client = distributed.Client(self.cluster)

    @property
    def workers(self) -> int:
        return len(self.client.scheduler_info()["workers"])

    def check(self, root: str, sample: str, out_dir: str) -> None:
        readable = is_url(root) or os.access(os.path.join(root, sample), os.R_OK)
        answers = self.client.run(_probe, root, sample if readable else "", out_dir)
        problems = [f"{worker}: {why}" for worker, why in sorted(answers.items()) if why]
        if problems:
            need = (
                "reach the store: the remote extra (pip install 'im2rec[remote]') and the same "
                "credentials (AWS_* variables or files)"
                if is_url(root) or is_url(out_dir)
                else "see the image root and the output folder at the same paths (a shared "
                "filesystem such as NFS or Lustre)"
            )
            raise DatasetError(
                "workers cannot use the data: "
                + "; ".join(problems)
                + f". Every worker must {need}"
            )

    def run(self, specs: Sequence[ShardSpec], hooks: RunHooks) -> None:
        from distributed import as_completed

        latest: dict[int, tuple[int, int]] = {}

        run_id = uuid.uuid4().hex[:8]

        def on_event(event: tuple[float, dict[str, Any]]) -> None:
            msg = event[1]
            if msg.get("run") == run_id:  # other runs may share the cluster
                latest[msg["shard"]] = (msg["done"], msg["bytes"])

        self.client.subscribe_topic(TOPIC, on_event)
        futures = [
            self.client.submit(
                _dask_task,
                spec,
                hooks.resume,
                run_id,
                key=f"pack-{spec.stem}-{run_id}",
                retries=self.retries,
                pure=False,
            )  # fmt: skip
            for spec in specs
        ]
        stems = {f.key: spec.stem for f, spec in zip(futures, specs, strict=True)}
        done: set[int] = set()
        pending = as_completed(futures)
        try:
            while not pending.is_empty():
                for future in pending.next_batch(block=False):
                    result = _result(future, stems[future.key])
                    done.add(result.index)
                    hooks.on_result(result)
                for index, (count, nbytes) in list(latest.items()):
                    if index not in done:
                        hooks.on_progress(index, count, nbytes)
                time.sleep(0.1)
        except KeyboardInterrupt:
            self.client.cancel(futures)
            raise PackInterrupted(
                f"interrupted with {len(done)} of {len(specs)} shards done; they are kept: "
                "run the same command with --resume to pack the rest"
            ) from None
        except BaseException:
            with contextlib.suppress(OSError):  # a lost scheduler must not hide the error
                self.client.cancel(futures)
            raise
        finally:
            self.client.unsubscribe_topic(TOPIC)

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def __enter__(self) -> DaskRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def require_dask() -> Any:
    """The ``distributed`` module, or a :class:`ConfigError` saying how to get it."""
    try:
        import distributed
    except ImportError:
        raise ConfigError(
            "--executor dask needs Dask: pip install 'im2rec[dask]' "
            "(or pip install 'dask[distributed]')"
        ) from None
    return distributed


def _result(future: Any, stem: str) -> ShardResult:
    try:
        result: ShardResult = future.result()
    except Im2RecError as exc:
        raise type(exc)(f"shard {stem}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - KilledWorker, worker-side crashes: name the shard
        raise Im2RecError(
            f"shard {stem} failed on the cluster ({type(exc).__name__}: {exc}); the shards "
            "already done are kept: fix the cause and run again with --resume"
        ) from None
    return result


def _probe(root: str, sample: str, out_dir: str) -> str | None:
    """Runs on each worker: can it see what the run needs?"""
    if is_url(root) or is_url(out_dir):
        return _probe_store(root, sample, out_dir)
    if not os.path.isdir(root):
        return f"cannot see the image root {root}"
    if sample and not os.access(os.path.join(root, sample), os.R_OK):
        return f"cannot read {sample} under {root}"
    probe = Path(out_dir) / f".im2rec-probe-{uuid.uuid4().hex[:8]}"
    try:
        os.close(create_output(probe))
        probe.unlink()
    except OSError as exc:
        return f"cannot write to {out_dir} ({exc.strerror})"
    return None


def _probe_store(root: str, sample: str, out_dir: str) -> str | None:
    """:func:`_probe` where the images or the outputs are in a store: the
    worker needs the remote extra and the credentials, not the same paths."""
    from ..storage import write_bytes
    from ..storage.objects import remove, size_of, url_join

    try:
        if is_url(root):
            if sample and size_of(url_join(root, sample)) is None:
                return f"cannot find {sample} under {root}"
        elif not os.path.isdir(root):
            return f"cannot see the image root {root}"
        if is_url(out_dir):
            probe = url_join(out_dir, f".im2rec-probe-{uuid.uuid4().hex[:8]}")
            write_bytes(probe, b"")
            remove(probe)
    except Im2RecError as exc:
        return str(exc)
    return None


def _dask_task(spec: ShardSpec, resume: bool, run_id: str) -> ShardResult:
    """Runs on a Dask worker: one shard, with progress sent as events."""
    from distributed import get_worker

    worker = get_worker()
    tune_malloc()  # undo what Dask's nanny does to malloc (MALLOC_TRIM_THRESHOLD_)
    last = [0.0]

    def progress(done: int, total: int, nbytes: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.5 or done == total:
            last[0] = now
            message = {"run": run_id, "shard": spec.index, "done": done, "bytes": nbytes}
            worker.log_event(TOPIC, message)

    # Dask's worker processes are daemons and cannot fork a pool: pass-through
    # overlaps its reads on threads, re-encoding runs in the task itself.
    threads = PASS_THROUGH_THREADS if spec.options.pass_through else 1
    with LocalExecutor(threads) as executor:
        result = pack_shard(spec, executor=executor, resume=resume, on_progress=progress)
    result.worker = str(worker.address)
    return result
