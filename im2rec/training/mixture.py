"""Several recs read as one dataset, in set proportions: :class:`MixedDataset`
(the sources end to end, each sample's label kept apart per source) and
:class:`MixtureSampler` (each epoch's draws from every source).

An epoch of ``epoch_size`` samples takes ``round(weight * epoch_size)``
from each source (the last source the remainder): exactly those counts, so
the proportions hold every epoch, and, the sources interleaved by a seeded
shuffle, in every stretch of it up to sampling noise. A source's samples
come in a permutation of its own, made from ``(seed, source, epoch, lap)``:
a source smaller than its share is gone through again in another order (a
new lap); a larger one gives the first of a new permutation each epoch, so
an epoch depends on nothing before it (resuming needs only the epoch and
the draws done). Ranks take every ``num_replicas``-th draw
(the epoch cut to a multiple of them), so they read disjoint samples.
Resuming is :class:`~im2rec.training.blockorder.BlockSampler`'s, with the
same state (:mod:`~im2rec.training.sampler_state`, its slots the epoch's
draws): ``state_dict(consumed=n)``, or without it what the pass handed out;
a rank's state loads only on that rank, and :func:`merge_states` of every
rank's resumes on another number of ranks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError
from .augment import Augmenter, process_rng
from .dataset import RecordDataset
from .loading import Batch, new_batch
from .sampler_state import ResumableSampler, whole

__all__ = ["MixedDataset", "MixtureSampler"]

Labels = Literal["offset", "source"]


class MixedDataset:
    """The samples of ``datasets`` end to end: index ``i`` is sample ``i -
    starts[s]`` of source ``s``. ``labels="offset"`` (the default) adds to
    each source's class labels the number of classes of the sources before
    it (``len(classes)``, or one more than its largest label when it has no
    class map: a scan of its headers), so the classes stay distinct (for
    ``labels="boxes"`` sources, the classes of each target's ``labels``);
    ``labels="source"`` gives ``(source, label)`` instead; ``progress``
    shows that scan as a ``tqdm.auto`` bar. With the same
    :class:`~im2rec.training.augment.Augmenter` on every source's
    ``output="bytes"``, a ``DataLoader`` batch is decoded into shared memory
    as :class:`RecordDataset` does, a source at a time (its samples come
    grouped by source)."""

    def __init__(
        self,
        datasets: Sequence[RecordDataset],
        *,
        labels: Labels = "offset",
        progress: bool = False,
    ):
        if not datasets:
            raise ConfigError("a mixture needs at least one dataset")
        if labels not in ("offset", "source"):
            raise ConfigError(f"labels must be 'offset' or 'source', not {labels!r}")
        self.datasets = list(datasets)
        self.labels = labels
        sizes = [len(ds) for ds in self.datasets]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.offsets = [0] * len(sizes)
        if labels == "offset":
            total = 0
            for s, ds in enumerate(self.datasets):
                self.offsets[s] = total
                total += len(ds.classes) or _label_count(ds, progress)
        self.classes = [name for ds in self.datasets for name in ds.classes] if all(
            ds.classes for ds in self.datasets
        ) else []  # fmt: skip

    def __len__(self) -> int:
        return int(self.starts[-1])

    def source_of(self, i: int) -> tuple[int, int]:
        """``(source, index in it)`` of sample ``i``."""
        if not 0 <= i < len(self):
            raise IndexError(f"sample {i} of a mixture of {len(self)}")
        s = int(np.searchsorted(self.starts, i, side="right")) - 1
        return s, i - int(self.starts[s])

    def _label(self, s: int, label: Any) -> Any:
        if self.labels == "source":
            return (s, label)
        if self.offsets[s] and isinstance(label, int):
            return label + self.offsets[s]
        if self.offsets[s] and isinstance(label, dict) and "labels" in label:  # a detection target
            return {**label, "labels": label["labels"] + self.offsets[s]}
        return label

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        s, j = self.source_of(int(i))
        image, label = self.datasets[s][j]
        return image, self._label(s, label)

    def __getitems__(self, indices: Sequence[int]) -> Sequence[tuple[Any, Any]]:
        """A ``DataLoader`` batch: with one ``Augmenter`` on every source,
        decoded into one shared array a source at a time (grouped by
        source); otherwise sample by sample, in order."""
        augment = self.datasets[0].transform
        same = isinstance(augment, Augmenter) and all(
            ds.output == "bytes" and ds.transform is augment for ds in self.datasets
        )
        if not same or not indices:
            return [self[i] for i in indices]
        assert isinstance(augment, Augmenter)
        placed = [self.source_of(int(i)) for i in indices]
        order = sorted(
            range(len(placed)), key=lambda k: placed[k][0]
        )  # (stable: a source's in order)
        images, home = new_batch(len(indices), augment.data_shape, augment.dtype)
        write = augment.writer(process_rng())
        labels: list[Any] = []
        at = 0
        while at < len(order):
            s = placed[order[at]][0]
            end = at
            while end < len(order) and placed[order[end]][0] == s:
                end += 1
            local = [placed[k][1] for k in order[at:end]]
            got = self.datasets[s]._fill(local, images[at:end], write)
            labels += [self._label(s, label) for label in got]
            at = end
        return Batch(images, labels, home)

    collate = staticmethod(RecordDataset.collate)


def _label_count(ds: RecordDataset, progress: bool = False) -> int:
    """One more than the largest whole-number label of ``ds``'s records (of
    the largest class of their boxes, for ``labels="boxes"``): a walk of
    every header, shown as a bar with ``progress``."""
    from ..progress import progress_bar

    reader = ds.reader
    buf, size = reader.mapping()
    with progress_bar(progress, None, desc=f"counting classes: {reader.name}", unit="B",
                      total=1, scale=True) as report:  # fmt: skip
        return _top_label(ds, buf, size, report) + 1


def _top_label(ds: RecordDataset, buf: Any, size: int, report: Any) -> int:
    from ..recordio.detection import problem, read_label
    from ..recordio.walking import header_at, walk_records

    reader = ds.reader
    top = -1
    for n, (head, nxt) in enumerate(walk_records(reader)):  # type: ignore[misc]
        if report is not None and n % 4096 == 0:
            report(head, size)
        header = header_at(buf, head, nxt, reader.name)
        if ds.labels == "boxes":
            if header.flag and problem(header.label) is None:
                objects = read_label(header.label).objects
                top = max(top, int(objects[:, 0].max(initial=-1)))
        elif not header.flag and float(header.label).is_integer():
            top = max(top, int(header.label))
    if report is not None:
        report(size, size)
    return top


class MixtureSampler(ResumableSampler):
    """A ``DataLoader`` sampler over a :class:`MixedDataset`: each epoch
    ``epoch_size`` draws (default: the mixture's length) in the proportions
    ``weights`` (one a source, any scale), as the module says."""

    def __init__(
        self,
        mixture: MixedDataset,
        weights: Sequence[float],
        *,
        epoch_size: int | None = None,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        sizes = np.diff(mixture.starts)
        w = np.asarray(weights, np.float64)
        if len(w) != len(sizes) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ConfigError(
                f"need {len(sizes)} weights, one a source, none negative, not all 0: {weights!r}"
            )
        if np.any((w > 0) & (sizes == 0)):
            raise ConfigError("a source with a weight holds no samples")
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ConfigError(f"need 0 <= rank < num_replicas, not rank {rank} of {num_replicas}")
        size = len(mixture) if epoch_size is None else whole(epoch_size, "epoch_size", 1)
        if not 0 < size <= 1 << 34:  # (an epoch's draws are 9 bytes each, in memory)
            raise ConfigError(f"epoch_size must be 1 to 2**34, not {size}")
        if size < num_replicas:
            raise ConfigError(
                f"epoch_size {size:,} is smaller than num_replicas {num_replicas}: every rank "
                "takes every num_replicas-th draw, so each would get nothing"
            )
        counts = np.floor(w / w.sum() * size + 0.5).astype(np.int64)
        counts[np.flatnonzero(w)[-1]] += size - int(counts.sum())  # (rounding's remainder)
        self.counts, self.sizes, self.starts = counts, sizes, mixture.starts
        self.seed, self.num_replicas, self.rank = int(seed), num_replicas, rank
        self.size = size
        self.set_epoch(0)

    kind = "mixture"

    def _per_rank(self, epoch: int) -> int:
        return self.size // self.num_replicas

    def _slots(self) -> int:
        return self.size

    def _rank_slots(self, replicas: int, rank: int) -> np.ndarray:
        """Rank ``rank`` of ``replicas``'s draws (positions in the epoch's)."""
        return np.arange(rank, self.size, replicas, dtype=np.int64)[: self.size // replicas]

    def draws(self) -> np.ndarray:
        """Every draw of the current epoch (mixture indices), in order."""
        rng = np.random.default_rng([self.seed, self.epoch])
        which = rng.permutation(np.repeat(np.arange(len(self.counts)), self.counts))
        draws = np.empty(len(which), np.int64)
        for s, count in enumerate(self.counts.tolist()):
            if not count:
                continue
            laps = -(-count // int(self.sizes[s]))
            local = np.concatenate([
                np.random.default_rng([self.seed, s, self.epoch, lap]).permutation(self.sizes[s])
                for lap in range(laps)
            ])[:count]  # fmt: skip
            draws[which == s] = self.starts[s] + local
        return draws

    def order(self) -> np.ndarray:
        """This rank's draws of the current epoch (mixture indices), from the first."""
        slots = self._elastic if self._elastic is not None else self._rank_slots(
            self.num_replicas, self.rank
        )  # fmt: skip
        mine: np.ndarray = self.draws()[slots]
        return mine

    def __iter__(self) -> Iterator[int]:
        draws = self.order()
        yield from self._pass(lambda start: draws[start:].tolist())
