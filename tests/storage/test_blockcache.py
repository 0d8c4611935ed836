"""Remote files read through whole blocks kept in a folder
(im2rec.storage.blockcache): its budget and settings, the version of the
object it serves, and a folder nobody else can plant anything in, against
a real HTTP range server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from im2rec.errors import ConfigError
from im2rec.storage.blockcache import BlockCache, CachedView
from im2rec.training.blockorder import BlockSampler
from im2rec.training.dataset import RecordDataset

from ..rangeserver import serving
from ..training.test_blockorder import BLOCK, cached_dataset, folder, labels_of, needs_remote

__all__ = ["folder"]  # (the fixture, shared with the epoch tests)


@pytest.mark.slow
def test_the_budget_is_kept_and_a_changed_object_is_fetched_again(
    folder: Path, tmp_path: Path
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "data.rec").write_bytes((folder / "data.rec").read_bytes())
    (served / "data.idx").write_bytes((folder / "data.idx").read_bytes())
    with serving(served) as server:
        small = cached_dataset(f"{server.url}/data.rec", tmp_path / "cache", budget=5 * BLOCK,
                               ahead=1)  # fmt: skip
        view = small.reader._ensure_open()
        with pytest.raises(ConfigError, match="budget"):
            BlockSampler(small, window=4)  # two windows of 4 blocks do not fit in 5
        assert sorted(labels_of(small, BlockSampler(small, window=1))) == list(range(300))
        assert small.reader.cache is not None
        assert small.reader.cache.used() <= 5 * BLOCK
        assert len(view.held()) <= 6
        # the object changes (its ETag): the old blocks are not served
        big = cached_dataset(f"{server.url}/data.rec", tmp_path / "cache2")
        labels_of(big, range(300))
        fetched = server.gets["/data.rec"]
        rec = bytearray((served / "data.rec").read_bytes())
        header_end = 8 + 24  # the first record's payload starts here
        rec[header_end] ^= 0xFF
        (served / "data.rec").write_bytes(bytes(rec))
        os.utime(served / "data.rec", ns=(1, 1))
        fresh = cached_dataset(f"{server.url}/data.rec", tmp_path / "cache2")
        assert fresh[0][0] == bytes(rec[header_end : header_end + len(fresh[0][0])])
        assert server.gets["/data.rec"] > fetched


@pytest.mark.slow
def test_without_an_etag_a_rewrite_is_told_by_its_time(folder: Path, tmp_path: Path) -> None:
    """A server that sends no ETag (Python's http.server, many static ones):
    an object rewritten with the same size is told by its Last-Modified,
    in a later run and in a dataset that was open meanwhile (which serves
    the blocks it holds of the version it opened, and refuses to fetch a
    block of another)."""
    from im2rec.storage.bounded import ObjectChanged

    served = tmp_path / "served"
    served.mkdir()
    for name in ("data.rec", "data.idx"):
        (served / name).write_bytes((folder / name).read_bytes())
    with serving(served, etag=False) as server:
        url = f"{server.url}/data.rec"
        ds = cached_dataset(url, tmp_path / "cache")
        first = ds[0][0]
        rec = bytearray((served / "data.rec").read_bytes())
        payload_at = 8 + 24
        rec[payload_at] ^= 0xFF  # the same size, another first byte
        (served / "data.rec").write_bytes(bytes(rec))
        later = os.stat(served / "data.rec").st_mtime + 5
        os.utime(served / "data.rec", (later, later))
        assert ds[0][0] == first  # (the block it holds: the version it opened)
        with pytest.raises(ObjectChanged, match="changed while it was being read"):
            ds[299]  # a block it has to fetch: of another version
        fresh = cached_dataset(url, tmp_path / "cache")  # a later run
        assert fresh[0][0] == bytes(rec[payload_at : payload_at + len(first)]) != first


@pytest.mark.slow
def test_links_in_the_cache_are_never_followed(folder: Path, tmp_path: Path) -> None:
    """An object's folder is named from its URL: a symlink planted there
    is refused (else its blocks, and a user's own .npy files in the link's
    target, would be written or deleted through it); so is a cache folder
    others may write; links at the names of the stamp's, a block's and the
    layout's temporary files, and of a lock, are replaced, not followed."""
    from im2rec.errors import OutputError
    from im2rec.storage.bounded import version_of

    needs_remote()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "weights.npy").write_bytes(b"precious")
    with serving(folder) as server:
        url = f"{server.url}/data.rec"
        cache = BlockCache(str(tmp_path / "cache"), block_bytes=BLOCK, budget=64 << 20)
        os.makedirs(cache.folder, mode=0o700)
        os.symlink(victim, cache.object_folder(url))
        with pytest.raises(OutputError, match="is a symlink, not a folder"):
            RecordDataset(url, output="bytes", cache=cache)
        assert (victim / "weights.npy").read_bytes() == b"precious"
        os.unlink(cache.object_folder(url))
        os.chmod(cache.folder, 0o777)
        with pytest.raises(OutputError, match="may be written by others"):
            RecordDataset(url, output="bytes", cache=cache)
        os.chmod(cache.folder, 0o700)
        # the names of the blocks the reads below fetch, from a first run
        first = RecordDataset(url, output="bytes",
                              cache=BlockCache(str(tmp_path / "c0"), block_bytes=BLOCK))  # fmt: skip
        _ = [first[i] for i in range(0, 300, 7)]
        blocks = [p.stem for p in (tmp_path / "c0").rglob("*.blk")]
        assert len(blocks) > 3
        home = cache.object_folder(url)
        os.mkdir(home, 0o700)
        target = victim / "weights.npy"
        for name in (f".stamp.json.{os.getpid()}.tmp", "stamp.lock", f".blocks-{os.getpid()}.npy",
                     *(f"{b}.{os.getpid()}.part" for b in blocks)):  # fmt: skip
            os.symlink(target, home / name)
        ds = RecordDataset(url, output="bytes", cache=cache)
        local = RecordDataset(folder / "data.rec", output="bytes")
        assert [ds[i][0] for i in range(0, 300, 7)] == [local[i][0] for i in range(0, 300, 7)]
        view = ds.reader._ensure_open()
        assert isinstance(view, CachedView)
        view.align(ds.record_offsets())
        assert target.read_bytes() == b"precious" and not target.is_symlink()
        assert (
            json.loads((home / "stamp.json").read_text())["tag"]
            == version_of({"size": view.size, "ETag": view.version.etag}).tag
        )


def test_block_cache_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="two blocks"):
        BlockCache(str(tmp_path), budget=BLOCK, block_bytes=BLOCK)
    with pytest.raises(ConfigError, match="block_bytes"):
        BlockCache(str(tmp_path), block_bytes=10)
    assert BlockCache("~/x").folder == os.path.expanduser("~/x")


class _EvictedAtOnce(BlockCache):
    """A cache whose every block goes as soon as it is fetched: what another
    process's eviction does under load, between one process's fetch of a
    block and its open."""

    def evict(self, keep: Path) -> None:
        for _, _, path in list(self._blocks()):
            path.unlink(missing_ok=True)


@pytest.mark.slow
def test_a_block_evicted_before_its_reader_opens_it_is_read_all_the_same(
    folder: Path, tmp_path: Path
) -> None:
    """Three tries, then FileNotFoundError to the reader; now the block is
    opened under its lock, before anything can evict it."""
    needs_remote()
    cache = _EvictedAtOnce(str(tmp_path / "cache"), budget=4 * BLOCK, block_bytes=BLOCK)
    with serving(folder) as server:
        ds = RecordDataset(f"{server.url}/data.rec", output="bytes", cache=cache, labels="float")
        assert labels_of(ds, range(0, 300, 7)) == [float(i) for i in range(0, 300, 7)]
        view = ds.reader._ensure_open()
        assert isinstance(view, CachedView) and not view.held()  # (each evicted at once)


@pytest.mark.slow
def test_a_full_disk_during_a_fetch_is_one_error_and_leaves_no_part_file(
    folder: Path, tmp_path: Path
) -> None:
    """A bare OSError (EFBIG/ENOSPC) that left its .part file behind."""
    needs_remote()
    code = (
        "import resource, signal, sys\n"
        "from im2rec.errors import OutputError\n"
        "from im2rec.storage.blockcache import BlockCache\n"
        "from im2rec.training.dataset import RecordDataset\n"
        "cache = BlockCache(sys.argv[2], block_bytes=65536)\n"
        "ds = RecordDataset(sys.argv[1], output='bytes', cache=cache)\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (a write past the limit: EFBIG)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))\n"
        "try:\n"
        "    ds[299]  # (a block not fetched yet: the open read record 0)\n"
        "except OutputError as exc:\n"
        "    print(exc)\n"
    )
    import subprocess
    import sys

    with serving(folder) as server:
        done = subprocess.run(
            [sys.executable, "-c", code, f"{server.url}/data.rec", str(tmp_path / "cache")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{tmp_path / 'cache'}: no room for a " in done.stdout and "free space" in done.stdout
    assert not list((tmp_path / "cache").rglob("*.part"))
