"""Shuffled epochs that read a ``.rec`` a block at a time.

A uniformly shuffled epoch jumps across the whole file at every sample:
over an object store that is a request per sample, on a network file
system a seek. :class:`BlockSampler` shuffles at two levels instead:

1. the file is cut into blocks of consecutive records (``block_bytes``,
   tens of MB; for a cached remote dataset, the cache's own blocks), and
   the epoch visits the blocks in a random order;
2. the records of each run of ``window`` consecutive blocks (in that
   order) are shuffled together.

So an epoch reads each block once, whole, and at any time needs only a
window of blocks; a record's neighbours in a batch come from ``window``
places in the file. The order is a function of ``(seed, epoch)`` alone:
every record exactly once an epoch, the same order on every run, another
for every epoch. Across ranks (``num_replicas``/``rank``, as torch's
``DistributedSampler``) the blocks are dealt out, so each rank reads its own
part of the file; the shorter parts repeat a few of their records (or, with
``drop_last``, the longer ones drop a few) so every rank has as many.
``set_epoch(epoch, start=n)`` resumes an epoch after its first ``n``
samples. With a cached remote dataset the sampler also tells the cache
which blocks come next, so they are fetched, several at once, before the
DataLoader's workers ask for them.

Resuming, defined once: a *pass* is one iteration over the sampler. It
begins where ``set_epoch``/``load_state_dict`` said (``start``), or at the
epoch's first sample; ``len(sampler)`` is the length of the pass in
progress, or of the next one (it does not change when a pass begins), and
``state_dict(consumed=n)`` is the state after the first ``n`` samples *of
that pass*: ``start + n`` from the epoch's beginning. So a job that counts
the samples it trained on since it (re)started, and checkpoints, resumes
exactly there, however many times it was resumed before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..storage.blockcache import BlockCache, CachedView

__all__ = ["BlockPlan", "BlockSampler", "epoch_order", "merge_states"]


def epoch_order(
    blocks: np.ndarray,
    seed: int,
    epoch: int,
    window: int,
    num_replicas: int = 1,
    rank: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``(samples, block_sequence)`` of one epoch for ``rank``: the sample
    positions in order, and the blocks in the order they are read.
    ``blocks[i]`` is sample ``i``'s block (any non-negative integers)."""
    ids, members = np.unique(blocks, return_inverse=True)
    rng, dealt = _dealt(len(ids), seed, epoch)
    visit = dealt[rank::num_replicas]
    # samples grouped by block, in file order within each
    by_block = np.argsort(members, kind="stable")
    bounds = np.searchsorted(members[by_block], np.arange(len(ids) + 1))
    pieces = []
    for first in range(0, len(visit), window):
        group = visit[first : first + window]
        chosen = np.concatenate([by_block[bounds[b] : bounds[b + 1]] for b in group])
        pieces.append(rng.permutation(chosen))
    samples = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
    return samples.astype(np.int64), ids[visit]


def _dealt(blocks: int, seed: int, epoch: int) -> tuple[np.random.Generator, np.ndarray]:
    """The epoch's generator and its order of the ``blocks`` (block ``k``
    of it goes to rank ``k % num_replicas``)."""
    rng = np.random.default_rng([seed, epoch])
    return rng, rng.permutation(blocks)


class BlockSampler:
    """A torch ``DataLoader`` sampler over a
    :class:`~im2rec.training.dataset.RecordDataset` (no torch needed):
    block-shuffled epochs (see the module). ``block_bytes`` defaults to the
    dataset's cache blocks, or 32 MiB for a local file."""

    def __init__(
        self,
        dataset: Any,
        *,
        seed: int = 0,
        window: int = 4,
        block_bytes: int | None = None,
        num_replicas: int = 1,
        rank: int = 0,
        drop_last: bool = False,
    ) -> None:
        if window < 1:
            raise ConfigError(f"window must be at least 1 block, not {window}")
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ConfigError(f"need 0 <= rank < num_replicas, not rank {rank} of {num_replicas}")
        self.seed, self.window, self.drop_last = int(seed), int(window), drop_last
        self.num_replicas, self.rank = num_replicas, rank
        offsets = dataset.record_offsets()
        view = dataset.reader._ensure_open()
        self.view = view if isinstance(view, CachedView) else None
        if self.view is not None and block_bytes is None:
            self.blocks = self.view.block_of(offsets)
        else:
            size = int(block_bytes or 32 << 20)
            if size < 1:
                raise ConfigError(f"block_bytes must be positive, not {size}")
            self.blocks = offsets // size
        if self.view is not None:
            cache = self.view.cache
            need = (2 * window + cache.ahead) * cache.block_bytes
            if cache.budget < need:
                raise ConfigError(
                    f"the cache budget ({cache.budget:,} bytes) is smaller than two windows of "
                    f"{window} blocks and {cache.ahead} ahead ({need:,} bytes): blocks would "
                    "be dropped before they are read; raise the budget, or use smaller blocks "
                    "or a smaller window"
                )
        self._sizes = np.unique(self.blocks, return_counts=True)[1]  # records a block
        if 0 < len(self._sizes) < num_replicas:
            raise ConfigError(
                f"{num_replicas} ranks but only {len(self._sizes)} blocks: some ranks would "
                "read nothing; use smaller blocks (block_bytes) or fewer ranks"
            )
        self.set_epoch(0)

    def _per_rank(self, epoch: int, replicas: int | None = None) -> int:
        """Samples each of ``replicas`` ranks (this job's) gets in ``epoch``:
        the blocks are dealt anew every epoch, so the parts' lengths change
        with it."""
        replicas = self.num_replicas if replicas is None else replicas
        if replicas == 1:
            return len(self.blocks)
        dealt = self._sizes[_dealt(len(self._sizes), self.seed, epoch)[1]]
        counts = [int(dealt[r::replicas].sum()) for r in range(replicas)]
        return min(counts) if self.drop_last else max(counts)

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """The epoch the next pass runs (its order), beginning after its
        first ``start`` samples (to resume one); later passes begin at its
        first sample."""
        per_rank = self._per_rank(int(epoch))
        if not 0 <= start <= per_rank:
            raise ConfigError(f"start must be 0 to {per_rank:,}, not {start:,}")
        self.epoch, self.per_rank = int(epoch), per_rank
        self.start = self.begun = int(start)  # (the next pass's start; the current pass's)
        self.yielded = 0  # samples the pass in progress has handed out
        self._elastic: np.ndarray | None = None  # this rank's rest of a resized epoch

    def state_dict(self, consumed: int | None = None) -> dict[str, int]:
        """What resumes this epoch after the first ``consumed`` samples of
        the pass in progress (or of the next one): ``load_state_dict`` of
        it, then iterate (see the module doc). Without ``consumed``, the
        samples the pass has handed out so far: what torchdata's
        ``StatefulDataLoader`` asks for as it draws each batch's indices
        (it then resumes after the batches the training loop was given)."""
        if consumed is None:
            consumed = self.yielded
        left = self.per_rank - self.begun
        if not 0 <= consumed <= left:
            raise ConfigError(
                f"consumed must be 0 to {left:,} (the samples of this pass), not {consumed:,}"
            )
        return {"seed": self.seed, "epoch": self.epoch, "start": self.begun + consumed,
                "num_replicas": self.num_replicas, "rank": self.rank}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict` of this rank, or from
        :func:`merge_states` of every rank of a job with another number of
        ranks (an elastic resume: see :func:`merge_states`)."""
        if int(state["seed"]) != self.seed:
            raise ConfigError(
                f"the state is of seed {state['seed']}, this sampler's is {self.seed}"
            )
        if "starts" not in state:
            replicas = int(state.get("num_replicas", self.num_replicas))
            if replicas != self.num_replicas or int(state.get("rank", self.rank)) != self.rank:
                raise ConfigError(
                    f"the state is of rank {state.get('rank')} of {replicas}; this sampler is "
                    f"rank {self.rank} of {self.num_replicas}: merge every rank's state with "
                    "merge_states() to resume with another number of ranks"
                )
            self.set_epoch(int(state["epoch"]), int(state["start"]))
            return
        self.set_epoch(int(state["epoch"]))
        rest = self._rest_of(int(state["num_replicas"]), [int(v) for v in state["starts"]])
        self._elastic = np.array_split(rest, self.num_replicas)[self.rank]
        self.per_rank = len(self._elastic)

    def _rest_of(self, replicas: int, starts: list[int]) -> np.ndarray:
        """The samples of this epoch that ``replicas`` ranks, having handed
        out ``starts[r]`` each, had not: in their ranks' order, rank 0's
        first, then every sample no rank's part held (a part cut by
        ``drop_last``), each once."""
        if len(starts) != replicas:
            raise ConfigError(f"the merged state has {len(starts)} starts for {replicas} ranks")
        per_rank = self._per_rank(self.epoch, replicas)
        seen = np.zeros(len(self.blocks), bool)
        pieces = []
        for rank, start in enumerate(starts):
            if not 0 <= start <= per_rank:
                raise ConfigError(f"rank {rank}'s start {start:,} is not 0 to {per_rank:,}")
            samples, _ = self._part(replicas, rank, per_rank)
            seen[samples[:start]] = True
            pieces.append(samples[start:])
        pieces.append(np.arange(len(self.blocks)))  # (what no part held)
        order = np.concatenate(pieces)
        order = order[~seen[order]]
        _, first = np.unique(order, return_index=True)
        rest: np.ndarray = order[np.sort(first)]
        return rest

    def order(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's samples for the current epoch (all of them, from
        the first), and its blocks in reading order."""
        if self._elastic is not None:
            samples = self._elastic
            _, first = np.unique(self.blocks[samples], return_index=True)
            return samples, self.blocks[samples][np.sort(first)]
        return self._part(self.num_replicas, self.rank, self.per_rank)

    def _part(self, replicas: int, rank: int, per_rank: int) -> tuple[np.ndarray, np.ndarray]:
        """Rank ``rank`` of ``replicas``'s samples of the current epoch, cut
        or padded to ``per_rank``, and its blocks in reading order."""
        samples, visit = epoch_order(
            self.blocks, self.seed, self.epoch, self.window, replicas, rank
        )
        if len(samples) > per_rank:
            samples = samples[:per_rank]
        elif len(samples) < per_rank:  # repeat from the start, as DistributedSampler pads
            repeats = -(-per_rank // max(1, len(samples)))
            samples = np.tile(samples, repeats)[:per_rank]
        return samples, visit

    def __len__(self) -> int:
        """The samples of the pass in progress, or of the next one."""
        return self.per_rank - self.begun

    def __iter__(self) -> Iterator[int]:
        samples, visit = self.order()
        start = self.begun = self.start
        self.start, self.yielded = 0, 0  # the next pass starts from the epoch's beginning
        for sample in self._samples(samples, visit, start):
            self.yielded += 1
            yield sample
        self.begun, self.yielded = self.start, 0  # this pass is over: len() is the next one's
        if self._elastic is not None:  # the resized epoch is over: the next is dealt anew
            self._elastic = None
            self.per_rank = self._per_rank(self.epoch)

    def _samples(self, samples: np.ndarray, visit: np.ndarray, start: int) -> Iterator[int]:
        if self.view is None:
            yield from samples[start:].tolist()
            return
        # Tell the cache what comes next: as the samples reach a block, the
        # blocks of the next windows are fetched (``ahead`` at a time).
        ahead = max(self.view.cache.ahead, self.window)
        position = {int(b): k for k, b in enumerate(visit)}
        reached = -1
        blocks = self.blocks
        for i in range(start, len(samples)):
            sample = int(samples[i])
            k = position.get(int(blocks[sample]), reached)
            if k > reached:
                reached = k
                first = (k // self.window) * self.window
                self.view.prefetch(visit[first : first + self.window + ahead])
            yield sample


def merge_states(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Every rank's :meth:`BlockSampler.state_dict` of one checkpoint as one
    state that a job with any number of ranks loads (an elastic resume: 8
    GPUs checkpointed, 6 resume): the records no rank had handed out are
    shared among the new ranks, each exactly once, in the old ranks' order
    (so mostly still a block at a time); the new ranks' parts differ by at
    most one record. The next epoch is dealt to the new ranks as usual."""
    if not states:
        raise ConfigError("no states to merge")
    first = states[0]
    replicas = int(first["num_replicas"])
    ranks = sorted(int(s["rank"]) for s in states)
    if ranks != list(range(replicas)):
        raise ConfigError(f"need the state of every rank 0..{replicas - 1}, got ranks {ranks}")
    for s in states:
        if (int(s["seed"]), int(s["epoch"]), int(s["num_replicas"])) != (
            int(first["seed"]), int(first["epoch"]), replicas
        ):  # fmt: skip
            raise ConfigError("the states are of different seeds, epochs or job sizes")
    starts = [0] * replicas
    for s in states:
        starts[int(s["rank"])] = int(s["start"])
    return {"seed": int(first["seed"]), "epoch": int(first["epoch"]), "num_replicas": replicas,
            "starts": starts}  # fmt: skip


class BlockPlan:
    """An :class:`~im2rec.training.iterator.ImageRecordIter`'s epochs over
    a cached remote ``.rec``: the block order of each epoch, and the blocks
    to fetch ahead as its batches are handed out."""

    def __init__(self, view: CachedView, every: np.ndarray, mine: np.ndarray, window: int):
        if window < 1:
            raise ConfigError(f"block_window must be at least 1 block, not {window}")
        view.align(every)  # (left in the cache for the workers, which have no index)
        self.view, self.window = view, window
        self.blocks = view.block_of(mine)
        self._visits: dict[int, dict[int, int]] = {}
        self._orders: dict[int, np.ndarray] = {}
        self._reached: dict[int, int] = {}

    def order(self, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
        """The records of ``epoch`` (positions): block-shuffled, or in file
        order without ``shuffle``."""
        if shuffle:
            samples, visit = epoch_order(self.blocks, seed, epoch, self.window)
        else:
            samples, visit = np.arange(len(self.blocks)), np.unique(self.blocks)
        for old in [e for e in self._visits if e < epoch - 1]:  # two epochs at most
            del self._visits[old], self._orders[old], self._reached[old]
        self._orders[epoch] = visit
        self._visits[epoch] = {int(b): k for k, b in enumerate(visit)}
        self._reached[epoch] = -1
        return samples

    def ask(self, positions: np.ndarray, epoch: int) -> None:
        """A batch of these records is being handed out: fetch the blocks of
        its window and the next ones."""
        where = self._visits.get(epoch)
        if where is None:
            return
        k = max(where.get(int(b), -1) for b in np.unique(self.blocks[positions]))
        if k > self._reached[epoch]:
            self._reached[epoch] = k
            first = (k // self.window) * self.window
            ahead = max(self.view.cache.ahead, self.window)
            self.view.prefetch(self._orders[epoch][first : first + self.window + ahead])


def block_plan(
    rec: str,
    storage_options: dict[str, Any] | None,
    cache: BlockCache | str | os.PathLike[str] | None,
    every: np.ndarray,
    mine: np.ndarray,
    window: int,
) -> tuple[BlockCache | None, BlockPlan | None]:
    """An iterator's ``cache`` (made of a folder name) and its plan, for a
    URL read through a cache; ``(None, None)`` otherwise (a local file is
    read in place: ``shuffle_chunk_size`` gives it MXNet's chunk order)."""
    from ..recordio import RecordReader
    from ..storage import is_url

    if cache is None or not is_url(rec):
        return None, None
    if not isinstance(cache, BlockCache):
        cache = BlockCache(os.fspath(cache))
    view = RecordReader(rec, storage_options=storage_options, cache=cache)._ensure_open()
    assert isinstance(view, CachedView)
    return cache, BlockPlan(view, every, mine, window)
