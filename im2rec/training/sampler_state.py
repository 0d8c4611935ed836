"""A sampler's resume state, defined once for
:class:`~im2rec.training.blockorder.BlockSampler` and
:class:`~im2rec.training.mixture.MixtureSampler` (docs/resuming.md).

An epoch is a fixed sequence of *slots* (a BlockSampler's are its samples,
a MixtureSampler's the epoch's draws), a function of the seed and the
epoch. ``R`` ranks each take a part of them. A job that stops mid-epoch and
resumes with another number of ranks (an elastic resume) shares out the
slots no rank had handed out; a job that stops again inside that resized
epoch must resume the same resized parts, so the state records every
resize of the epoch so far (``resized``: each time, the ranks and how far
each had got). From ``(seed, epoch, resized)`` every rank's part is known
again, so any chain of resumes and rank changes gives every slot of the
epoch exactly once (but the padding that makes the first parts equal, as
``DistributedSampler`` pads).

A rank's state (:meth:`SamplerState.to_dict`) is ``{"sampler", "seed",
"epoch", "samples", "num_replicas", "rank", "start", "resized"}``;
:func:`merge_states` makes every rank's one state any number of ranks
loads (``"starts"`` instead of ``rank`` and ``start``). Every field is
checked when loaded: whole numbers (not ``2.7``, not ``True``) in range,
the same kind of sampler, seed and size of epoch, and a rank's state only
on that rank of that many ranks. A state of im2rec 0.2.0's BlockSampler
(``seed``, ``epoch``, ``start``) loads on a job of one rank.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = [
    "Resize",
    "ResumableSampler",
    "SamplerState",
    "merge_states",
    "resized_parts",
    "whole",
]

#: the most rank changes one epoch may have been resumed through
MAX_RESIZES = 64
#: the most ranks a state may name
MAX_REPLICAS = 1 << 20


def whole(value: Any, name: str, low: int = 0, high: int | None = None) -> int:
    """``value`` as a whole number from ``low`` to ``high``; ConfigError
    naming ``name`` when it is not one (``2.7``, ``"3"``, ``True``, ``-5``)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(f"{name} is {value!r}, not a whole number")
    number = int(value)
    if number < low or (high is not None and number > high):
        top = "" if high is None else f" to {high:,}"
        raise ConfigError(f"{name} is {number:,}; it must be {low:,}{top}")
    return number


@dataclass(frozen=True)
class Resize:
    """A rank change inside an epoch: ``num_replicas`` ranks had handed
    out the first ``starts[r]`` slots of their parts."""

    num_replicas: int
    starts: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"num_replicas": self.num_replicas, "starts": list(self.starts)}

    @classmethod
    def from_dict(cls, data: Any, name: str) -> Resize:
        if not isinstance(data, Mapping) or set(data) != {"num_replicas", "starts"}:
            raise ConfigError(f"the state's {name} is not a resize (num_replicas, starts)")
        replicas = whole(data["num_replicas"], f"the state's {name}.num_replicas", 1, MAX_REPLICAS)
        starts = data["starts"]
        if not isinstance(starts, Sequence) or isinstance(starts, str) or len(starts) != replicas:
            raise ConfigError(
                f"the state's {name}.starts must hold one start for each of {replicas} ranks"
            )
        return cls(
            replicas,
            tuple(whole(s, f"the state's {name}.starts[{r}]") for r, s in enumerate(starts)),
        )


@dataclass(frozen=True)
class SamplerState:
    """One rank's place in an epoch (``rank``, ``start``), or every rank's
    (``starts``, from :func:`merge_states`)."""

    sampler: str  # "block" or "mixture"
    seed: int
    epoch: int
    samples: int | None  # the epoch's slots (another dataset or epoch size is refused)
    num_replicas: int
    resized: tuple[Resize, ...] = ()
    rank: int | None = None
    start: int | None = None
    starts: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sampler": self.sampler,
            "seed": self.seed,
            "epoch": self.epoch,
            "samples": self.samples,
            "num_replicas": self.num_replicas,
        }
        if self.starts is None:
            out.update(rank=self.rank, start=self.start)
        else:
            out["starts"] = list(self.starts)
        out["resized"] = [step.to_dict() for step in self.resized]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> SamplerState:
        """A state as :meth:`to_dict` wrote it, every field checked."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a sampler state is a dict, not {type(data).__name__}")
        if set(data) == {"seed", "epoch", "start"}:  # im2rec 0.2.0's BlockSampler: one rank
            return cls("block", whole(data["seed"], "the state's seed"),
                       whole(data["epoch"], "the state's epoch"), None, 1, rank=0,
                       start=whole(data["start"], "the state's start"))  # fmt: skip
        need = {"sampler", "seed", "epoch", "samples", "num_replicas", "resized"}
        merged = "starts" in data
        keys = need | ({"starts"} if merged else {"rank", "start"})
        if set(data) != keys:
            missing, extra = sorted(keys - set(data)), sorted(set(data) - keys)
            raise ConfigError(
                f"not a sampler state of this im2rec (missing {missing}, unknown {extra}); "
                "a state is made by state_dict() or merge_states()"
            )
        if data["sampler"] not in ("block", "mixture"):
            raise ConfigError(f"the state's sampler is {data['sampler']!r}, not block or mixture")
        replicas = whole(data["num_replicas"], "the state's num_replicas", 1, MAX_REPLICAS)
        resized = data["resized"]
        if (
            not isinstance(resized, Sequence)
            or isinstance(resized, str)
            or len(resized) > MAX_RESIZES
        ):
            raise ConfigError(f"the state's resized is not a list of at most {MAX_RESIZES} resizes")
        common = {
            "sampler": data["sampler"], "seed": whole(data["seed"], "the state's seed"),
            "epoch": whole(data["epoch"], "the state's epoch"),
            "samples": whole(data["samples"], "the state's samples"),
            "num_replicas": replicas,
            "resized": tuple(Resize.from_dict(s, f"resized[{k}]") for k, s in enumerate(resized)),
        }  # fmt: skip
        if merged:
            return cls(**common, starts=Resize.from_dict(
                {"num_replicas": replicas, "starts": data["starts"]}, "merged").starts)  # fmt: skip
        rank = whole(data["rank"], "the state's rank", 0, replicas - 1)
        return cls(**common, rank=rank, start=whole(data["start"], "the state's start"))

    def check(self, sampler: str, seed: int, samples: int) -> None:
        """That this state is of such a sampler (kind, seed, epoch's size)."""
        if self.sampler != sampler:
            raise ConfigError(f"the state is of a {self.sampler} sampler; this is a {sampler} one")
        if self.seed != seed:
            raise ConfigError(f"the state is of seed {self.seed}, this sampler's is {seed}")
        if self.samples is not None and self.samples != samples:
            raise ConfigError(
                f"the state is of an epoch of {self.samples:,} samples, this sampler's has "
                f"{samples:,}: another dataset, or other options"
            )

    def chain(self, num_replicas: int, rank: int) -> tuple[Resize, ...]:
        """The epoch's resizes, as ``num_replicas`` ranks loading this state
        resume it (this rank's ``rank``): a rank's state only on that rank
        of that many ranks; a merged one on any number."""
        if self.starts is not None:
            return (*self.resized, Resize(self.num_replicas, self.starts))
        if self.samples is None and num_replicas != 1:
            raise ConfigError(
                "the state is of im2rec 0.2.0, which did not record its rank: it resumes only a "
                "job of one rank (num_replicas=1); start this epoch over"
            )
        if (self.num_replicas, self.rank) != (num_replicas, rank):
            raise ConfigError(
                f"the state is of rank {self.rank} of {self.num_replicas}; this sampler is rank "
                f"{rank} of {num_replicas}: merge every rank's state with merge_states() to "
                "resume with another number of ranks, and give each rank its own state otherwise"
            )
        return self.resized


def merge_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every rank's ``state_dict()`` of one checkpoint as one state that a
    job with any number of ranks loads (an elastic resume: 8 GPUs
    checkpointed, 6 resume): the slots no rank had handed out are shared
    among the new ranks, each exactly once, in the old ranks' order (so
    mostly still a block at a time); the new ranks' parts differ by at most
    one. The next epoch is dealt to the new ranks as usual."""
    if not states:
        raise ConfigError("no states to merge")
    parsed = [SamplerState.from_dict(s) for s in states]
    first = parsed[0]
    if any(s.starts is not None for s in parsed):
        raise ConfigError("merge the states of the ranks, not a state merged already")
    ranks = sorted(s.rank for s in parsed if s.rank is not None)
    if ranks != list(range(first.num_replicas)):
        raise ConfigError(
            f"need the state of every rank 0..{first.num_replicas - 1}, got ranks {ranks}"
        )
    shared = ("sampler", "seed", "epoch", "samples", "num_replicas", "resized")
    for s in parsed:
        if any(getattr(s, key) != getattr(first, key) for key in shared):
            raise ConfigError("the states are of different samplers, seeds, epochs or job sizes")
    starts = [0] * first.num_replicas
    for s in parsed:
        assert s.rank is not None and s.start is not None
        starts[s.rank] = s.start
    merged = SamplerState(first.sampler, first.seed, first.epoch, first.samples,
                          first.num_replicas, first.resized, starts=tuple(starts))  # fmt: skip
    return merged.to_dict()


def resized_parts(
    part: Callable[[int, int], np.ndarray], slots: int, chain: Sequence[Resize], replicas: int
) -> list[np.ndarray]:
    """Every rank's part (slots, int64) for ``replicas`` ranks of an epoch
    of ``slots`` slots resumed through the rank changes ``chain`` (oldest
    first); ``part(R, r)`` is rank ``r`` of ``R``'s part of the epoch as
    first dealt. At each change the ranks' parts after their starts, in
    rank order, then every slot no part held (cut by ``drop_last`` or an
    epoch's remainder), each slot once and none handed out before, are
    split among the next ranks, the first ones one longer."""
    seen = np.zeros(slots, bool)
    parts = [part(chain[0].num_replicas, r) for r in range(chain[0].num_replicas)]
    for k, step in enumerate(chain):
        if len(step.starts) != len(parts) or step.num_replicas != len(parts):
            raise ConfigError(f"the state's resize {k} does not follow the one before it")
        pieces = []
        for r, (held, start) in enumerate(zip(parts, step.starts, strict=True)):
            if not 0 <= start <= len(held):
                raise ConfigError(
                    f"the state's resize {k}: rank {r}'s start {start:,} is not 0 to {len(held):,}"
                )
            seen[held[:start]] = True
            pieces.append(held[start:])
        pieces.append(np.arange(slots, dtype=np.int64))
        order = np.concatenate(pieces).astype(np.int64)
        order = order[~seen[order]]
        _, first = np.unique(order, return_index=True)
        rest = order[np.sort(first)]
        following = chain[k + 1].num_replicas if k + 1 < len(chain) else replicas
        parts = np.array_split(rest, following)
    return parts


class ResumableSampler:
    """What both samplers share: the epoch and where its pass begins,
    ``len()``, counting what a pass hands out, and ``state_dict`` /
    ``load_state_dict`` in :class:`SamplerState`'s layout (an elastic
    resume included). A sampler says what its slots are
    (:meth:`_per_rank`, :meth:`_rank_slots`, :meth:`_slots`) and iterates
    through :meth:`_pass`."""

    kind: str  # SamplerState's "sampler"
    seed: int
    num_replicas: int
    rank: int

    def _per_rank(self, epoch: int) -> int:
        """The slots each rank of this job takes in ``epoch``."""
        raise NotImplementedError

    def _rank_slots(self, replicas: int, rank: int) -> np.ndarray:
        """Rank ``rank`` of ``replicas``'s slots of the current epoch."""
        raise NotImplementedError

    def _slots(self) -> int:
        """The slots of an epoch (what a state must agree on)."""
        raise NotImplementedError

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """The epoch the next pass runs (its order), beginning after its
        first ``start`` slots (to resume one); later passes begin at its
        first slot."""
        epoch = whole(epoch, "epoch")
        per_rank = self._per_rank(epoch)
        start = whole(start, "start", 0, per_rank)
        self.epoch, self.per_rank = epoch, per_rank
        self.start = self.begun = start  # (the next pass's start; the current pass's)
        self.yielded = 0  # slots the pass in progress has handed out
        self._elastic: np.ndarray | None = None  # this rank's slots of a resized epoch
        self._resized: tuple[Resize, ...] = ()  # the rank changes this epoch went through

    def __len__(self) -> int:
        """The slots of the pass in progress, or of the next one."""
        return self.per_rank - self.begun

    def _pass(self, slots: Callable[[int], Iterable[int]]) -> Iterator[int]:
        """One pass: ``slots(start)`` handed out and counted; then the next
        pass begins at the epoch's first slot, and a resized epoch is over
        (the next one is dealt anew)."""
        start = self.begun = self.start
        self.start, self.yielded = 0, 0
        for slot in slots(start):
            self.yielded += 1
            yield slot
        self.begun, self.yielded = self.start, 0  # this pass is over: len() is the next one's
        if self._elastic is not None:
            self._elastic, self._resized = None, ()
            self.per_rank = self._per_rank(self.epoch)

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """What resumes this epoch after the first ``consumed`` slots of the
        pass in progress (or of the next one): ``load_state_dict`` of it,
        then iterate. Without ``consumed``, the slots the pass has handed
        out so far: what torchdata's ``StatefulDataLoader`` asks for as it
        draws each batch's indices (it then resumes after the batches the
        training loop was given)."""
        consumed = self.yielded if consumed is None else consumed
        consumed = whole(consumed, "consumed", 0, self.per_rank - self.begun)
        return SamplerState(self.kind, self.seed, self.epoch, self._slots(), self.num_replicas,
                            self._resized, rank=self.rank,
                            start=self.begun + consumed).to_dict()  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict` of this rank, or from
        :func:`merge_states` of every rank of a job with another number of
        ranks (an elastic resume), however many resumes and rank changes
        the epoch went through before."""
        loaded = SamplerState.from_dict(state)
        loaded.check(self.kind, self.seed, self._slots())
        chain = loaded.chain(self.num_replicas, self.rank)
        self.set_epoch(loaded.epoch)
        if chain:
            parts = resized_parts(self._rank_slots, self._slots(), chain, self.num_replicas)
            self._elastic, self._resized = parts[self.rank], chain
            self.per_rank = len(self._elastic)
        start = 0 if loaded.start is None else loaded.start
        self.start = self.begun = whole(start, "the state's start", 0, self.per_rank)
