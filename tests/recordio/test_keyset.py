"""KeySet, the writer's record of written keys: a set, in bits."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from im2rec.recordio.keyset import KeySet

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow

KEYS = (
    st.integers(0, 5000)
    | st.integers(0, 2**64 - 1)
    | st.integers(-10, -1)
    | st.text(max_size=3)
    | st.booleans()
)


@settings(max_examples=300, deadline=None)
@given(added=st.lists(KEYS, max_size=200), asked=st.lists(KEYS, max_size=50))
def test_it_answers_as_a_set(added: list[object], asked: list[object]) -> None:
    keys, expected = KeySet(), set()
    for key in added:
        keys.add(key)
        expected.add(key)
        assert key in keys
    assert len(keys) == len(expected)
    for key in asked + added:
        assert (key in keys) == (key in expected), key


def test_dense_keys_cost_bits_not_objects() -> None:
    # 5M keys in a set: ~300 MB; as bits: under 2 MB (measured as peak RSS)
    code = """
import random
from im2rec.recordio.keyset import KeySet
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
base = peak()
keys = KeySet()
order = list(range(0, 5_000_000, 1000))
for start in order:  # blocks of ascending keys, in a random block order
    for key in range(start, start + 1000):
        keys.add(key)
assert len(keys) == 5_000_000 and 4_999_999 in keys and 5_000_000 not in keys
print(peak() - base)
"""
    grown = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout)  # fmt: skip
    assert grown < 8 << 20, f"{grown / 1e6:.1f} MB for 5M keys"


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(KEYS, st.booleans()), max_size=200))
def test_insert_and_taking_back_answer_as_a_set(steps: list[tuple[object, bool]]) -> None:
    """insert (the writers' one lookup a record) says whether the key was
    new, as ``len`` of a set would; discard_new takes back what it added."""
    keys, expected = KeySet(), set()
    for key, take_back in steps:
        new = key not in expected
        assert keys.insert(key) is new
        expected.add(key)
        if new and take_back:
            keys.discard_new(key)
            expected.discard(key)
        assert len(keys) == len(expected)
        assert (key in keys) == (key in expected)
    for key, _ in steps:
        assert (key in keys) == (key in expected), key
