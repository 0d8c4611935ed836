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
from .sampler_state import ResumableSampler, merge_states

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


class BlockSampler(ResumableSampler):
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
        if block_bytes is not None and (
            isinstance(block_bytes, bool) or not isinstance(block_bytes, int | np.integer)
            or block_bytes < 1
        ):  # fmt: skip
            raise ConfigError(
                f"block_bytes must be a positive number of bytes, not {block_bytes!r}"
            )
        if self.view is not None and block_bytes is None:
            self.blocks = self.view.block_of(offsets)
        else:
            self.blocks = offsets // int(block_bytes or 32 << 20)
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

    kind = "block"

    def _slots(self) -> int:
        return len(self.blocks)

    def _rank_slots(self, replicas: int, rank: int) -> np.ndarray:
        return self._part(replicas, rank, self._per_rank(self.epoch, replicas))[0]

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

    def __iter__(self) -> Iterator[int]:
        samples, visit = self.order()
        yield from self._pass(lambda start: self._samples(samples, visit, start))

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
