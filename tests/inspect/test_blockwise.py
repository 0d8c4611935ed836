"""rec info and rec verify read whole records a block at a time, on arrays:
what they say must be what the per-record walk says of the same file, for
every kind of record and damage, whatever the block size."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.errors import Im2RecError
from im2rec.inspect import verifying
from im2rec.inspect.summary import summarise
from im2rec.inspect.verifying import verify
from im2rec.recordio import blocks, frame, pack
from im2rec.recordio import detection as layout
from im2rec.recordio.codec import MAGIC_BYTES
from im2rec.recordio.detection import make_label
from im2rec.recordio.header import IRHeader
from im2rec.recordio.walking import walk_records

corner = st.one_of(st.floats(-0.25, 1.25, width=32), st.sampled_from([-3.0, 250.0]))  # (pixels)
size = st.floats(0, 0.5, width=32)  # (0: an empty box)
cls = st.one_of(st.integers(0, 5).map(float), st.sampled_from([0.5, -1.0, 2.0**24]))
box = st.tuples(cls, corner, corner, size, size).map(
    lambda b: (b[0], b[1], b[2], b[1] + b[3], b[2] + b[4])
)
detection = st.tuples(st.lists(box, max_size=6), st.sampled_from([(), (640.0, 480.0)])).map(
    lambda t: make_label(np.asarray(t[0], np.float32).reshape(-1, 5), t[1])
)
label = st.one_of(
    st.floats(-5, 5, width=32),  # one label, in the header
    detection,
    detection,
    detection,  # (most records detection labels: rec info then describes them)
    detection.map(lambda v: np.concatenate([v, [np.float32(0.5)]])),  # (a ragged one)
    st.lists(st.floats(width=32, allow_nan=True), min_size=1, max_size=9).map(
        lambda v: np.asarray(v, np.float32)
    ),
    st.just(np.asarray([3.0, 4.0], np.float32)),  # (a face layout record, with no image)
)
payload = st.one_of(
    st.binary(max_size=30), st.binary(max_size=8).map(lambda b: b + MAGIC_BYTES + b)
)


@st.composite
def files(draw: st.DrawFn) -> bytes:
    parts, hostile = [], draw(st.booleans())  # (else every record's header reads)
    for i, (value, data) in enumerate(
        draw(st.lists(st.tuples(label, payload), min_size=2, max_size=30))
    ):
        if isinstance(value, np.ndarray) and len(value) == 2:
            data = b""
        record = pack(IRHeader(0, value, i, 0), data)
        part = frame(record)
        if hostile and draw(st.integers(0, 15)) == 0:  # a record too short for its header
            part = frame(bytes(draw(st.integers(0, 23))))
        if len(record) % 4 and len(part) == len(frame(record)) and draw(st.integers(0, 15)) == 0:
            part = part[:-1] + b"\x07"  # (padding that is not zeros)
        parts.append(part)
    if parts and hostile and draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), draw(st.binary(min_size=1, max_size=20)))
    return b"".join(parts)


def _per_record(
    reader: Any, *, recover: bool = False, block: int = 0, start: int = 0, labels: bool = False
) -> Iterator[Any]:
    return walk_records(reader, recover=recover, start=start)


def _outcome(call: Any) -> Any:
    try:
        return call()
    except Im2RecError as exc:
        return str(exc)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files(), st.sampled_from([32, 100, 4096]))
def test_blocks_say_what_records_say(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, block: int
) -> None:
    path = tmp_path_factory.mktemp("w") / "x.rec"
    path.write_bytes(data)
    walk = blocks.walk_blocks
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verifying, "BLOCKS_FROM", 0)
        mp.setattr(verifying, "_FIRST", 1)
        mp.setattr(layout, "_BOUNDED", 0)  # (the quick answers from column bounds too)
        mp.setattr(blocks, "walk_blocks", functools.partial(walk, block=block))
        by_block = (_outcome(lambda: summarise(path)),
                    _outcome(lambda: verify(path, boxes=True).to_dict()),
                    _outcome(lambda: verify(path).to_dict()))  # fmt: skip
        mp.setattr(blocks, "walk_blocks", _per_record)
        by_record = (_outcome(lambda: summarise(path)),
                     _outcome(lambda: verify(path, boxes=True).to_dict()),
                     _outcome(lambda: verify(path).to_dict()))  # fmt: skip
    assert by_block == by_record
