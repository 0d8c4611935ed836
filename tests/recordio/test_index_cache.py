"""The index's binary copy (``NAME.idx.im2rec`` in the private cache): the same
index as the text, used only when it is this user's own and matches its
``.idx`` in full, never trusted past a change."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from im2rec.recordio import load_index

from ..synthetic_rec import RECORD, synthetic


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from im2rec.recordio import index_cache

    monkeypatch.setattr(index_cache, "CACHE_FROM", 10)
    monkeypatch.setattr(index_cache, "SETTLED_NS", 0)  # (the file is seconds old at most)
    rec = synthetic(tmp_path / "c", 3000)
    load_index(rec.with_suffix(".idx"))  # parses, and writes the copy
    assert Path(index_cache.cache_path(rec.with_suffix(".idx"))).is_file()
    return rec.with_suffix(".idx")


def test_the_copy_gives_the_same_index_and_lives_in_a_folder_of_ones_own(cached: Path) -> None:
    from im2rec.recordio import index_cache

    assert index_cache.read_cache(cached) is not None
    index = load_index(cached)
    assert list(index.key_view()) == list(range(3000))
    assert index.offset_of(2999) == 2999 * RECORD.itemsize and index.dense_table is not None
    assert sorted(p.name for p in cached.parent.iterdir()) == ["c.idx", "c.rec"]  # nothing beside
    folder = Path(index_cache.cache_path(cached)).parent
    assert (folder.stat().st_mode & 0o777) == 0o700


def test_a_mapped_index_travels_as_the_name_of_its_copy(cached: Path) -> None:
    from im2rec.errors import IndexFormatError
    from im2rec.recordio import index_cache

    index = load_index(cached)
    sent = pickle.dumps(index)
    assert len(sent) < 1000  # (not the 72 kB of arrays)
    again = pickle.loads(sent)
    assert again.offset_of(2999) == index.offset_of(2999) and len(again) == 3000
    assert not again.offsets.flags.writeable  # a view of the shared pages
    assert pickle.loads(sent).offsets is again.offsets  # mapped once a process
    del again
    copy = Path(index_cache.cache_path(cached))
    (copy.parent / "new").write_bytes(copy.read_bytes())
    os.replace(copy.parent / "new", copy)  # the same bytes, in a copy made after the open
    assert pickle.loads(sent).offset_of(2999) == index.offset_of(2999)  # checked anew, used
    copy.unlink()
    with pytest.raises(IndexFormatError, match="changed after the dataset was opened"):
        pickle.loads(sent)


def test_the_open_that_writes_the_copy_already_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first open after a dataset is made: what it hands a spawned
    # DataLoader worker is the copy's name, not the parsed arrays
    from im2rec.recordio import index_cache

    monkeypatch.setattr(index_cache, "CACHE_FROM", 10)
    monkeypatch.setattr(index_cache, "SETTLED_NS", 0)
    idx = synthetic(tmp_path / "f", 3000).with_suffix(".idx")
    index = load_index(idx)
    assert Path(index_cache.cache_path(idx)).is_file()
    assert not index.offsets.flags.writeable and not index.keys.flags.writeable
    assert len(pickle.dumps(index)) < 1000
    assert index.offset_of(2999) == 2999 * RECORD.itemsize


def test_a_changed_idx_is_parsed_again(cached: Path) -> None:
    from im2rec.recordio import index_cache

    lines = cached.read_text().splitlines(keepends=True)
    lines[0], lines[1] = lines[1].replace("1\t", "0\t"), lines[0].replace("0\t", "1\t")
    cached.write_text("".join(lines))  # same size, two offsets swapped
    assert index_cache.read_cache(cached) is None
    index = load_index(cached)
    assert index.offset_of(0) == RECORD.itemsize and index.offset_of(1) == 0


@pytest.mark.slow
def test_an_idx_edited_in_its_middle_with_its_time_restored_is_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its change time moves (no one can set that back): the two offsets
    swapped in the middle, past the hashed first and last MiB, are read."""
    from im2rec.recordio import index_cache

    monkeypatch.setattr(index_cache, "CACHE_FROM", 10)
    monkeypatch.setattr(index_cache, "SETTLED_NS", 0)
    idx = synthetic(tmp_path / "m", 300_000).with_suffix(".idx")
    assert idx.stat().st_size > 3 << 20
    load_index(idx)
    assert index_cache.read_cache(idx) is not None
    info = idx.stat()
    data = bytearray(idx.read_bytes())
    a, b = f"150000\t{150000 * RECORD.itemsize}\n", f"150001\t{150001 * RECORD.itemsize}\n"
    at = data.index(a.encode())
    swapped = f"150000\t{150001 * RECORD.itemsize}\n150001\t{150000 * RECORD.itemsize}\n"
    assert len(swapped) == len(a) + len(b)
    with open(idx, "r+b") as f:  # in place, as `rsync --inplace` or an editor would
        f.seek(at)
        f.write(swapped.encode())
    os.utime(idx, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert (idx.stat().st_size, idx.stat().st_mtime_ns) == (info.st_size, info.st_mtime_ns)
    assert index_cache.read_cache(idx) is None
    assert load_index(idx).offset_of(150000) == 150001 * RECORD.itemsize


def test_a_reader_outlives_its_dataset_folder_refreshed_in_place(cached: Path) -> None:
    """The copy is not in the dataset's folder: rewriting the .idx there in
    place (rsync --inplace) while a job has the index mapped leaves the job
    reading, never cut short under it (SIGBUS)."""
    index = load_index(cached)
    text = cached.read_bytes()
    with open(cached, "r+b") as f:
        f.truncate(0)
        f.write(text)
    assert index.offset_of(2999) == 2999 * RECORD.itemsize and int(index.offsets.sum()) > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make files of another user")
def test_a_copy_or_folder_another_user_could_write_is_not_used(cached: Path) -> None:
    """A copy made by another user (here: handed to uid 65534), a hard link
    to one, or a cache folder others may write is not read: the .idx is
    parsed, so a planted copy with two offsets swapped gives nothing."""
    from im2rec.recordio import index_cache

    copy = Path(index_cache.cache_path(cached))
    head = index_cache._HEADER.size
    data = bytearray(copy.read_bytes())
    offsets = np.frombuffer(data, "<i8", 3000, head + 8 * 3000)
    table = np.frombuffer(data, "<i8", 3000, head + 16 * 3000)
    offsets[[3, 4]] = offsets[[4, 3]]
    table[[3, 4]] = table[[4, 3]]  # (consistent: it passes every check of its content)
    copy.write_bytes(bytes(data))
    assert index_cache.read_cache(cached) is not None  # this user's own: trusted
    os.chown(copy, 65534, 65534)
    assert index_cache.read_cache(cached) is None
    os.chown(copy, 0, 0)
    os.link(copy, copy.with_name("extra"))
    assert index_cache.read_cache(cached) is None
    os.unlink(copy.with_name("extra"))
    os.chmod(copy.parent, 0o777)
    assert index_cache.read_cache(cached) is None
    assert load_index(cached).offset_of(3) == 3 * RECORD.itemsize  # parsed
    os.chmod(copy.parent, 0o700)


def test_an_idx_changed_in_the_last_seconds_is_not_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two changes within one tick of the file system's clock share a change
    time: an .idx is copied only once it has been still for a while."""
    from im2rec.recordio import index_cache

    monkeypatch.setattr(index_cache, "CACHE_FROM", 10)
    idx = synthetic(tmp_path / "r", 100).with_suffix(".idx")
    load_index(idx)
    assert not Path(index_cache.cache_path(idx)).exists()
    monkeypatch.setattr(index_cache, "SETTLED_NS", 0)
    load_index(idx)
    assert Path(index_cache.cache_path(idx)).exists()


@pytest.mark.parametrize("damage", ["truncated", "duplicate", "unaligned", "table", "huge"])
def test_a_damaged_copy_is_not_used(cached: Path, damage: str) -> None:
    from im2rec.recordio import index_cache

    path = Path(index_cache.cache_path(cached))
    data = bytearray(path.read_bytes())
    head = index_cache._HEADER.size
    keys = np.frombuffer(data, "<i8", 3000, head)
    offsets = np.frombuffer(data, "<i8", 3000, head + 8 * 3000)
    if damage == "truncated":
        data = data[:-8]
    elif damage == "duplicate":
        keys[5] = 4  # (and the table still says key 5 is at its offset)
    elif damage == "unaligned":
        offsets[7] += 2
    elif damage == "table":
        np.frombuffer(data, "<i8", 1, head + 16 * 3000 + 8 * 9)[:] = 0  # key 9 -> byte 0
    else:  # a count past what the .idx can hold: refused before allocating
        fields = list(index_cache._HEADER.unpack_from(data))
        fields[7] = 1 << 60
        data[:head] = index_cache._HEADER.pack(*fields)
    path.write_bytes(bytes(data))
    assert index_cache.read_cache(cached) is None
    index = load_index(cached)  # parsed from the text again, and right
    assert index.offset_of(9) == 9 * RECORD.itemsize and index.offset_of(5) == 5 * RECORD.itemsize


def test_no_copy_when_turned_off_or_without_a_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from im2rec.recordio import index_cache

    monkeypatch.setattr(index_cache, "CACHE_FROM", 10)
    monkeypatch.setattr(index_cache, "SETTLED_NS", 0)
    rec = synthetic(tmp_path / "c", 100)
    monkeypatch.setenv("IM2REC_INDEX_CACHE", "0")
    load_index(rec.with_suffix(".idx"))
    assert not Path(index_cache.cache_path(rec.with_suffix(".idx"))).exists()
    monkeypatch.delenv("IM2REC_INDEX_CACHE")
    (tmp_path / "not-a-folder").write_bytes(b"")
    monkeypatch.setenv("IM2REC_CACHE_DIR", str(tmp_path / "not-a-folder"))
    assert load_index(rec.with_suffix(".idx")).offset_of(99) == 99 * RECORD.itemsize
