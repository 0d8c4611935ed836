"""Views of an index with no Python object per record: the drop-in's keys as a
list code may reorder and its idx as a mapping code may edit."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest

from im2rec.recordio import IndexedRecordReader, MXIndexedRecordIO, load_index
from im2rec.recordio.views import KeyList

from ..synthetic_rec import RECORD, synthetic


def test_drop_in_keys_are_a_list_code_may_reorder(tmp_path: Path) -> None:
    rec = synthetic(tmp_path / "d", 100)
    r = MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    assert isinstance(r.keys, KeyList) and r.keys == list(range(100))
    random.Random(0).shuffle(r.keys)  # what training code does with MXNet's list
    assert sorted(r.keys) == list(range(100)) and r.keys != list(range(100))
    assert r.read_idx(r.keys[0]) == IndexedRecordReader(rec).read_key(r.keys[0])
    r.keys.sort()
    assert list(r.keys) == list(range(100))
    r.keys.append("extra")  # anything a list takes
    assert r.keys[-1] == "extra" and len(r.keys) == 101
    assert load_index(rec.with_suffix(".idx")).key_view()[:3] == [0, 1, 2]  # the index unchanged


def test_drop_in_idx_is_a_mapping_code_may_edit(tmp_path: Path) -> None:
    rec = synthetic(tmp_path / "d", 10)
    r = MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    assert len(r.idx) == 10 and 3 in r.idx and r.idx[3] == 3 * RECORD.itemsize
    r.idx[99] = r.idx[4]
    del r.idx[3]
    assert r.read_idx(99) == r.read_idx(4)
    with pytest.raises(KeyError):
        r.read_idx(3)
    assert len(r.idx) == 10 and 3 not in r.idx and list(r.idx)[-1] == 99
    assert dict(pickle.loads(pickle.dumps(r.idx))) == dict(r.idx)
