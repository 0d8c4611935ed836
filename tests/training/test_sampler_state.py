"""One sampler state for BlockSampler and MixtureSampler: every field
checked where it is loaded, a rank's state only on its rank, and exactly
once across any chain of resumes and rank changes (a property)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.errors import ConfigError
from im2rec.training import BlockSampler, MixedDataset, MixtureSampler, RecordDataset, merge_states

from .test_iterator import jpeg_rec, write_rec

RECORDS = 41


@pytest.fixture(scope="module")
def recs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("states")
    small = write_rec(folder / "small.rec", [b"x" * 10] * 7, [float(i) for i in range(7)])
    return jpeg_rec(folder / "r.rec", RECORDS, (16, 12)), small


def block(rec: Path, replicas: int = 1, rank: int = 0, drop_last: bool = False) -> BlockSampler:
    return BlockSampler(RecordDataset(rec, output="bytes"), seed=5, block_bytes=1500,
                        num_replicas=replicas, rank=rank, drop_last=drop_last)  # fmt: skip


def mixture(recs: tuple[Path, Path], replicas: int = 1, rank: int = 0) -> MixtureSampler:
    mixed = MixedDataset([RecordDataset(p, output="bytes", labels="float") for p in recs])
    return MixtureSampler(mixed, [3, 1], epoch_size=45, seed=5, num_replicas=replicas, rank=rank)


# -- every field checked ------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        ({"epoch": -5}, "the state's epoch is -5; it must be 0"),
        ({"start": 2.7}, "the state's start is 2.7, not a whole number"),
        ({"start": True}, "the state's start is True, not a whole number"),
        ({"start": "3"}, "the state's start is '3', not a whole number"),
        ({"start": 10**9}, "the state's start is 1,000,000,000; it must be 0 to"),
        ({"seed": 6}, "the state is of seed 6"),
        ({"samples": 40}, "an epoch of 40 samples, this sampler's has"),
        ({"rank": 3}, "the state's rank is 3; it must be 0 to 1"),
        ({"num_replicas": 0}, "the state's num_replicas is 0"),
        ({"sampler": "mixture"}, "the state is of a mixture sampler; this is a block one"),
        ({"sampler": "other"}, "not block or mixture"),
        ({"resized": [{"num_replicas": 2, "starts": [1]}]}, "one start for each of 2 ranks"),
        ({"resized": "no"}, "resized is not a list"),
        ({"extra": 1}, "unknown ['extra']"),
    ],
)
def test_a_state_is_checked_field_by_field(
    recs: tuple[Path, Path], edit: dict[str, Any], words: str
) -> None:
    state = {**block(recs[0], 2, 1).state_dict(), **edit}
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace("[", r"\[")):
        block(recs[0], 2, 1).load_state_dict(state)


@pytest.mark.parametrize("kind", ["block", "mixture"])
def test_a_ranks_state_loads_only_on_that_rank(recs: tuple[Path, Path], kind: str) -> None:
    """A MixtureSampler state of rank 1 of 4 loaded on rank 0 of 2 and
    repeated samples (BlockSampler refused it): one check for both."""
    make: Callable[..., Any] = (lambda r, k: block(recs[0], r, k)) if kind == "block" else (
        lambda r, k: mixture(recs, r, k)
    )  # fmt: skip
    state = make(4, 1).state_dict(consumed=2)
    for replicas, rank in ((2, 0), (4, 0), (1, 0)):
        with pytest.raises(ConfigError, match="the state is of rank 1 of 4; this sampler is rank"):
            make(replicas, rank).load_state_dict(state)
    make(4, 1).load_state_dict(state)
    other = "mixture" if kind == "block" else "block"
    foreign = (mixture(recs) if other == "mixture" else block(recs[0])).state_dict()
    with pytest.raises(ConfigError, match=f"a {other} sampler; this is a {kind} one"):
        make(1, 0).load_state_dict(foreign)


def test_an_epoch_too_small_for_the_ranks_is_refused(recs: tuple[Path, Path]) -> None:
    """epoch_size=3 on 4 ranks gave every rank nothing, silently."""
    mixed = MixedDataset([RecordDataset(p, output="bytes", labels="float") for p in recs])
    with pytest.raises(ConfigError, match="epoch_size 3 is smaller than num_replicas 4"):
        MixtureSampler(mixed, [1, 1], epoch_size=3, num_replicas=4, rank=0)
    with pytest.raises(ConfigError, match="epoch_size is 2.5, not a whole number"):
        MixtureSampler(mixed, [1, 1], epoch_size=2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_block_bytes_must_be_a_positive_number(recs: tuple[Path, Path], size: Any) -> None:
    with pytest.raises(ConfigError, match="block_bytes must be a positive number of bytes"):
        BlockSampler(RecordDataset(recs[0]), block_bytes=size)


def test_set_epoch_takes_whole_numbers_only(recs: tuple[Path, Path]) -> None:
    for sampler in (block(recs[0]), mixture(recs)):
        with pytest.raises(ConfigError, match="epoch is -1"):
            sampler.set_epoch(-1)
        with pytest.raises(ConfigError, match="start is 1.5, not a whole number"):
            sampler.set_epoch(0, 1.5)  # type: ignore[arg-type]


def test_a_state_of_im2rec_0_2_0_loads_on_one_rank(recs: tuple[Path, Path]) -> None:
    old = {"seed": 5, "epoch": 2, "start": 7}
    one = block(recs[0])
    one.load_state_dict(old)
    assert (one.epoch, one.begun) == (2, 7)
    with pytest.raises(ConfigError, match="im2rec 0.2.0, which did not record its rank"):
        block(recs[0], 2, 0).load_state_dict(old)


# -- exactly once, across any chain of resumes --------------------------------

#: a chain: (ranks, how far into its part each rank gets, merge first?)
STEPS = st.lists(
    st.tuples(st.integers(1, 5), st.lists(st.floats(0, 1), min_size=5, max_size=5),
              st.booleans()),
    min_size=1, max_size=4,
)  # fmt: skip


def run_chain(
    make: Callable[[int, int], Any], steps: list[Any], epoch: int
) -> tuple[list[int], bool]:
    """Every sample the ranks handed out over ``steps`` (each: the job's
    ranks, how far each gets, and whether the next job merges the states or
    each rank resumes its own), then the last job to the epoch's end; and
    whether the states were ever merged (the epoch resized)."""
    resized = False
    replicas = steps[0][0]
    samplers = [make(replicas, r) for r in range(replicas)]
    for s in samplers:
        s.set_epoch(epoch)
    got: list[int] = []
    for k, (_, fractions, merge) in enumerate(steps):
        states = []
        for r, sampler in enumerate(samplers):
            take = int(fractions[r % len(fractions)] * len(sampler))
            it = iter(sampler)
            got += [next(it) for _ in range(take)]
            states.append(sampler.state_dict(consumed=take))
        following = steps[k + 1][0] if k + 1 < len(steps) else replicas
        if merge or following != replicas:
            resized = True
            replicas, merged = following, merge_states(states)
            samplers = [make(replicas, r) for r in range(replicas)]
            for s in samplers:
                s.load_state_dict(merged)
        else:  # each rank its own state, in a fresh sampler
            samplers = [make(replicas, r) for r in range(replicas)]
            for s, state in zip(samplers, states, strict=True):
                s.load_state_dict(state)
    for sampler in samplers:
        got += list(sampler)
    return got, resized


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, epoch=st.integers(0, 3), drop_last=st.booleans())
def test_block_samples_come_exactly_once_across_any_chain(
    recs: tuple[Path, Path], steps: list[Any], epoch: int, drop_last: bool
) -> None:
    """(An elastic resume checkpointed again inside the resized epoch gave
    records twice and never: the state did not say the epoch was resized.)"""
    got, resized = run_chain(lambda r, k: block(recs[0], r, k, drop_last), steps, epoch)
    counts = Counter(got)
    first = block(recs[0], steps[0][0], 0, drop_last)
    first.set_epoch(epoch)
    padding = steps[0][0] * len(first) - RECORDS  # (DistributedSampler's, or drop_last's cut)
    if not resized:  # exactly what the uninterrupted ranks give
        whole = [i for r in range(steps[0][0]) for i in _epoch(block(recs[0], steps[0][0], r,
                                                                         drop_last), epoch)]  # fmt: skip
        assert counts == Counter(whole)
        return
    assert set(counts) == set(range(RECORDS))  # a resize deals out what no part held, too
    assert len(got) - RECORDS <= max(0, padding)  # twice: only the first dealing's padding


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, epoch=st.integers(0, 3))
def test_mixture_draws_come_exactly_once_across_any_chain(
    recs: tuple[Path, Path], steps: list[Any], epoch: int
) -> None:
    taken, resized = run_chain(lambda r, k: mixture(recs, r, k), steps, epoch)
    got = Counter(taken)
    full = mixture(recs)
    full.set_epoch(epoch)
    draws = Counter(full.draws().tolist())
    if not resized:
        whole = Counter(i for r in range(steps[0][0]) for i in _epoch(mixture(recs, steps[0][0], r),
                                                                      epoch))  # fmt: skip
        assert got == whole
        return
    assert got == draws  # every draw of the epoch once (the remainder no rank held, too)


def _epoch(sampler: Any, epoch: int) -> list[int]:
    sampler.set_epoch(epoch)
    return list(sampler)


@pytest.mark.parametrize(
    ("edit", "words"),
    [({"batch": 2.7}, "the state's batch is 2.7, not a whole number"),
     ({"epoch": -5}, "the state's epoch is -5; it must be 0"),
     ({"batch": 99}, "the state's batch is 99; it must be 0 to"),
     ({"seed": True}, "the state's seed is True"), ({"other": 1}, "not an iterator state")],
)  # fmt: skip
def test_an_iterator_state_is_checked_the_same_way(
    recs: tuple[Path, Path], edit: dict[str, Any], words: str
) -> None:
    from im2rec.training import ImageRecordIter

    options = {"path_imgrec": str(recs[0]), "data_shape": (3, 8, 8), "batch_size": 4,
               "preprocess_threads": 1, "verbose": False}  # fmt: skip
    with ImageRecordIter(**options) as it:  # type: ignore[arg-type]
        state = {**it.state_dict(), **edit}
        with pytest.raises(ConfigError, match=words):
            it.load_state_dict(state)
