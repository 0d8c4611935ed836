"""IRHeader, pack and unpack: MXNet's label rules (docs/format.md, "The image header")."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from im2rec.errors import RecordFormatError
from im2rec.recordio import HEADER_SIZE, IRHeader, pack, unpack


def test_header_is_24_bytes_and_forces_flag_zero_for_scalars() -> None:
    assert HEADER_SIZE == 24
    packed = pack((5, 3, 7, 9), b"P")
    assert packed.hex() == "00000000000040400700000000000000090000000000000050"


def test_repr_matches_mxnet() -> None:
    assert repr(IRHeader(0, 1.0, 2, 3)) == "HEADER(flag=0, label=1.0, id=2, id2=3)"


def test_headers_pickle() -> None:
    import pickle

    header = unpack(pack((0, [1.5, 2], 3, 4), b""))[0]
    copy = pickle.loads(pickle.dumps(header))
    assert isinstance(copy, IRHeader) and copy.id == 3 and copy.label.tolist() == [1.5, 2.0]
    assert pickle.loads(pickle.dumps(IRHeader(0, 1.0, 2, 3))) == IRHeader(0, 1.0, 2, 3)


def test_array_label_layout() -> None:
    packed = pack((0, [1, 2, 3], 1, 0), b"s")
    assert packed[:4] == struct.pack("<I", 3)
    assert packed[4:8] == struct.pack("<f", 0.0)
    assert packed[24:36].hex() == "0000803f0000004000004040"
    header, payload = unpack(packed)
    assert header.flag == 3 and payload == b"s"
    assert header.label.dtype == np.float32 and header.label.tolist() == [1, 2, 3]
    assert not header.label.flags.writeable


@pytest.mark.parametrize(
    ("label", "flag", "header_label", "labels"),
    [
        (3, 0, 3.0, None),
        (0.1, 0, float(np.float32(0.1)), None),
        (np.float32(2.5), 0, 2.5, None),
        (np.int64(4), 0, 4.0, None),
        (True, 0, 1.0, None),
        ([1, 2, 3], 3, None, [1.0, 2.0, 3.0]),
        ((7,), 1, None, [7.0]),
        (np.array(2.0), 1, None, [2.0]),
        (np.bool_(True), 1, None, [1.0]),
        ("1.5", 1, None, [1.5]),
        ([], 0, 0.0, None),
        (np.arange(6).reshape(2, 3), 6, None, [0, 1, 2, 3, 4, 5]),
        (
            [0.1, float("inf"), float("-inf")],
            3,
            None,
            [float(np.float32(0.1)), float("inf"), float("-inf")],
        ),
    ],
)
def test_label_rules(
    label: object, flag: int, header_label: float | None, labels: list[float] | None
) -> None:
    header, payload = unpack(pack(IRHeader(99, label, 1, 2), b"xyz"))
    assert (header.flag, header.id, header.id2, payload) == (flag, 1, 2, b"xyz")
    if labels is None:
        assert isinstance(header.label, float) and header.label == header_label
    else:
        assert header.label.tolist() == labels


@pytest.mark.parametrize("label", [1e40, -1e39, [0.1, 1e40], np.array([1e300]), "abc"])
def test_labels_that_float32_cannot_hold_are_refused(label: object) -> None:
    # MXNet stored [0.1, 1e40] as [0.1, inf] without a word: silently wrong data
    with pytest.raises(RecordFormatError, match="float32|must be numbers"):
        pack(IRHeader(0, label, 1, 0), b"x")


@pytest.mark.parametrize("payload", [5, "text", None, [1, 2]])
def test_payload_must_be_bytes(payload: object) -> None:
    # MXNet's `bytes + payload` raised TypeError; bytes(5) would store five zeros
    with pytest.raises(TypeError, match="pack\\(\\) stores bytes after the header"):
        pack(IRHeader(0, 1.0, 1, 0), payload)  # type: ignore[arg-type]


def test_none_label_becomes_nan() -> None:
    header, _ = unpack(pack((0, None, 0, 0), b""))
    assert header.flag == 1 and np.isnan(header.label[0])


def test_scalar_label_widens_float32_like_mxnet() -> None:
    assert unpack(pack((0, 0.1, 0, 0), b""))[0].label == 0.10000000149011612


@given(
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.floats(width=32, allow_nan=False),
    st.binary(max_size=64),
)
def test_scalar_round_trip(id_: int, id2: int, label: float, payload: bytes) -> None:
    header, out = unpack(pack(IRHeader(0, label, id_, id2), payload))
    assert header == IRHeader(0, label, id_, id2) and out == payload
    assert type(header.flag) is int and type(header.id) is int


@given(
    hnp.arrays(np.float32, st.integers(1, 300), elements=st.floats(width=32, allow_nan=False)),
    st.binary(max_size=300),
)
def test_array_round_trip(labels: np.ndarray, payload: bytes) -> None:
    # The upstream test_recordio_pack_label, as a property.
    header, out = unpack(pack((0, labels, 0, 0), payload))
    assert header.flag == labels.size
    assert np.array_equal(header.label, labels) and out == payload


def test_unpack_accepts_memoryview() -> None:
    header, payload = unpack(memoryview(pack((0, [1, 2], 3, 0), b"img")))
    assert header.flag == 2 and bytes(payload) == b"img"


@pytest.mark.parametrize("id_", [-1, 2**64, 1.5])
def test_bad_ids_are_clear_errors(id_: object) -> None:
    with pytest.raises(
        RecordFormatError, match=r"header id=.* is not an integer in \[0, 2\*\*64\)"
    ):
        pack((0, 1, id_, 0), b"")


def test_bad_label_is_a_clear_error() -> None:
    with pytest.raises(RecordFormatError, match="cannot be stored as float32"):
        pack((0, 1j, 0, 0), b"")


def test_short_record_is_a_clear_error() -> None:
    with pytest.raises(RecordFormatError, match="record of 10 bytes is too short for the 24-byte"):
        unpack(b"x" * 10)


def test_missing_labels_are_a_clear_error() -> None:
    broken = pack((0, [1, 2, 3], 0, 0), b"")[:30]
    with pytest.raises(
        RecordFormatError, match="says 3 float32 labels follow, but the record holds only 30"
    ):
        unpack(broken)
