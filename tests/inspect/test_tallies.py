"""Tally: rec info's bounded counts, a batch at a time, as the rule says
one value at a time."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from im2rec.inspect.tallies import Tally

batches = st.lists(st.lists(st.integers(0, 12), max_size=30), max_size=8)


@given(batches, st.integers(0, 6), st.sampled_from([0, -6, 1 << 20]))
def test_a_tally_counts_as_the_rule_one_value_at_a_time(
    values: list[list[int]], limit: int, shift: int
) -> None:
    """A value is counted when it is counted already or fewer than
    ``limit`` are; the rest are summed as left (a batch's values rising;
    small whole numbers are counted in place, others sorted)."""
    values = [[v + shift for v in batch] for batch in values]
    counter: Counter[int] = Counter()
    left = 0
    tally = Tally(limit)
    for batch in values:
        found = Counter(batch)
        for value in sorted(found):
            if value in counter or len(counter) < limit:
                counter[value] += found[value]
            else:
                left += found[value]
        tally.add_all(np.asarray(batch, np.int64))
    assert tally.counts() == dict(sorted(counter.items()))
    assert tally.left == left


def test_nan_is_one_value_among_floats() -> None:
    tally = Tally(3, np.float32)
    tally.add_all(np.asarray([np.nan, 1.0, np.nan], np.float32))
    tally.add_all(np.asarray([np.nan, 0.5], np.float32))
    counts = tally.counts()
    assert [k for k in counts if k == k] == [0.5, 1.0]
    assert [n for k, n in counts.items() if k != k] == [3]
    assert tally.left == 0
    tally.add_all(np.asarray([2.0, 1.0], np.float32))  # (a fourth value: left out)
    assert tally.left == 1 and counts[1.0] + 1 == tally.counts()[1.0]


def test_minus_zero_is_zero_whichever_comes_first() -> None:
    """rec info's labels: a -0.0 label is the class 0 (named "0", never
    "-0"), however the records fall into batches."""
    for batches in ([[-0.0, 1.0, 0.0]], [[-0.0], [0.0, 1.0]], [[0.0], [-0.0]], [[-0.0, -0.0]]):
        tally = Tally(4, np.float32)
        for batch in batches:
            tally.add_all(np.asarray(batch, np.float32))
        zero = [k for k in tally.counts() if k == 0]
        assert zero and all(np.copysign(1.0, k) == 1.0 for k in zero), (batches, tally.counts())
        assert tally.counts()[0.0] == sum(b.count(0.0) for b in batches)
