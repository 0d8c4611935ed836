"""Listing and packing with the images, the lists and the outputs in a store:
real ``rec`` processes against a real S3-compatible server (moto's, see
:mod:`tests.s3server`), compared byte for byte with the same work on disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from ..conftest import children_of, wait_gone
from ..s3server import BUCKET

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow

pytest.importorskip("s3fs")


def make_tree(root: Path, classes: int, per_class: int, size: tuple[int, int]) -> list[str]:
    """Noise images (JPEG, and a PNG per class) in class folders; their names."""
    rng = np.random.default_rng(1)
    names = []
    for c in range(classes):
        for i in range(per_class):
            name = f"class{c}/img{i:04d}.{'png' if i == 0 else 'jpg'}"
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            arr = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            Image.fromarray(arr).save(path, quality=90)
            names.append(name)
    return names


def upload(s3: Any, root: Path, names: list[str], prefix: str) -> str:
    for name in names:
        s3.upload_file(str(root / name), BUCKET, f"{prefix}/{name}")
    return f"s3://{BUCKET}/{prefix}"


def get(s3: Any, key: str) -> bytes:
    data: bytes = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return data


def keys(s3: Any, prefix: str) -> list[str]:
    found = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return sorted(o["Key"] for o in found)


def rec(*args: str, spool: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IM2REC_SPOOL": str(spool)}
    done = subprocess.run([sys.executable, "-m", "im2rec", *args], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def tree(s3: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("tree") / "imgs"
    names = make_tree(root, 3, 12, (64, 48))
    return root, upload(s3, root, names, "imgs")


def pack_on_disk(root: Path, out: Path, spool: Path) -> None:
    """``out/imgs.lst`` and its pass-through pack, to compare with the store's."""
    rec("list", str(root), "--recursive", "-o", str(out / "imgs"), "-q", spool=spool)
    rec("pack", str(out / "imgs.lst"), "--pass-through", "-q", spool=spool)


def test_list_and_pack_in_the_store_match_the_same_on_disk(
    s3: Any, tree: tuple[Path, str], tmp_path: Path
) -> None:
    url, spool = tree[1], tmp_path / "spool"
    pack_on_disk(tree[0], tmp_path, spool)
    rec("list", url + "/", "--recursive", "-o", f"s3://{BUCKET}/lists/imgs", "-q", spool=spool)
    done = rec("pack", f"s3://{BUCKET}/lists/imgs.lst", "--pass-through", "--json", spool=spool)
    result = json.loads(done.stdout)[0]
    assert result["rec"] == f"s3://{BUCKET}/lists/imgs.rec" and result["records"] == 36
    for suffix in (".rec", ".idx"):  # the root found from the run record rec list left
        assert get(s3, f"lists/imgs{suffix}") == (tmp_path / f"imgs{suffix}").read_bytes()
    manifest = json.loads(get(s3, "lists/imgs.pack.json"))
    assert manifest["root"] == url and manifest["records"] == 36
    # published whole: no temporary keys left, and the spool is gone
    assert not [k for k in keys(s3, "lists/") if ".uploading" in k]
    assert not list(spool.iterdir())
    # other options are refused; the same command with --resume finds it done
    again = rec("pack", f"s3://{BUCKET}/lists/imgs.lst", "--resize", "32", spool=spool, check=False)
    assert again.returncode == 1
    assert (
        f"s3://{BUCKET}/lists/imgs.rec: already packed with --pass-through (now without), "
        "with --resize 0 (now 32); pass --overwrite" in again.stderr
    ), again.stderr
    assert "--overwrite" in again.stderr and "Traceback" not in again.stderr
    done = rec("pack", f"s3://{BUCKET}/lists/imgs.lst", "--pass-through", "--resume", spool=spool)
    assert "already packed" in done.stdout
    # a prefix finds every list beside it, as a local prefix does
    done = rec("pack", f"s3://{BUCKET}/lists/im", "--pass-through", "--json", spool=spool)
    assert [r["lst"] for r in json.loads(done.stdout)] == [f"s3://{BUCKET}/lists/imgs.lst"]


def test_a_local_list_reads_its_images_from_the_store(
    s3: Any, tree: tuple[Path, str], tmp_path: Path
) -> None:
    local_root, url = tree
    spool = tmp_path / "spool"
    rec("list", str(local_root), "--recursive", "-o", str(tmp_path / "a" / "imgs"), spool=spool)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "imgs.lst").write_bytes((tmp_path / "a" / "imgs.lst").read_bytes())
    flags = ["--resize", "24", "--quality", "80", "--num-workers", "2", "-q"]
    rec("pack", str(tmp_path / "a" / "imgs.lst"), *flags, spool=spool)
    rec("pack", str(tmp_path / "b" / "imgs.lst"), "--root", url, *flags, spool=spool)
    for suffix in (".rec", ".idx"):  # re-encoded in the pool from fetched bytes: the same
        a, b = (tmp_path / d / f"imgs{suffix}" for d in "ab")
        assert a.read_bytes() == b.read_bytes()
    missing = rec("pack", str(tmp_path / "b" / "imgs.lst"), "--root", f"s3://{BUCKET}/nope",
                  "--overwrite", spool=spool, check=False)  # fmt: skip
    assert missing.returncode != 0 and "no objects under this image root" in missing.stderr


def test_missing_images_in_the_store_are_reported_not_fatal(
    s3: Any, tree: tuple[Path, str], tmp_path: Path
) -> None:
    local_root, url = tree
    spool = tmp_path / "spool"
    text = (
        "0\t0.000000\tclass0/img0001.jpg\n1\t0.000000\tclass0/gone.jpg\n"
        "2\t1.000000\tclass1/img0001.jpg\n"
    )
    s3.put_object(Bucket=BUCKET, Key="partly/set.lst", Body=text.encode())
    done = rec("pack", f"s3://{BUCKET}/partly/set.lst", "--root", url, "--pass-through",
               "--json", spool=spool)  # fmt: skip
    result = json.loads(done.stdout)[0]
    assert result["records"] == 2 and result["failures"] == {"missing": 1}
    assert result["failure_report"] == f"s3://{BUCKET}/partly/set.failures.tsv"
    report = get(s3, "partly/set.failures.tsv").decode()
    assert "class0/gone.jpg\tmissing" in report


def test_resume_after_kill_continues_from_the_spool(s3: Any, tmp_path: Path) -> None:
    root = tmp_path / "many"
    names = make_tree(root, 2, 300, (320, 240))
    url = upload(s3, root, names, "many")
    spool = tmp_path / "spool"
    rec("list", str(root), "--recursive", "-o", str(tmp_path / "many"), spool=spool)
    flags = ["--resize", "160", "--num-workers", "1", "-q"]  # slow enough to be caught
    rec("pack", str(tmp_path / "many.lst"), *flags, spool=spool)
    reference = (tmp_path / "many.rec").read_bytes(), (tmp_path / "many.idx").read_bytes()
    s3.upload_file(str(tmp_path / "many.lst"), BUCKET, "kill/many.lst")
    cmd = [sys.executable, "-m", "im2rec", "pack", f"s3://{BUCKET}/kill/many.lst", "--root", url,
           *flags]  # fmt: skip
    env = {**os.environ, "IM2REC_SPOOL": str(spool)}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        # The .idx is flushed just after the .rec: wait for both, or the kill
        # can land between the two and leave nothing indexed to resume from.
        indexed = list(spool.glob("*/many.idx.partial"))
        if indexed and indexed[0].stat().st_size > 0:
            break
        time.sleep(0.01)
    if proc.poll() is not None:
        pytest.fail(f"rec pack ended before it could be killed: {proc.communicate()[1][-2000:]}")
    workers = children_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert "kill/many.rec" not in keys(s3, "kill/")  # nothing published
    wait_gone(workers)  # orphaned workers notice their parent is gone
    done = rec("pack", *cmd[4:], "--resume", "--json", spool=spool)
    assert json.loads(done.stdout)[0]["resumed_from"] > 0
    assert (get(s3, "kill/many.rec"), get(s3, "kill/many.idx")) == reference


def test_sharded_dask_pack_reads_and_writes_the_store(
    s3: Any, tree: tuple[Path, str], tmp_path: Path
) -> None:
    url, spool = tree[1], tmp_path / "spool"
    pack_on_disk(tree[0], tmp_path, spool)
    s3.upload_file(str(tmp_path / "imgs.lst"), BUCKET, "sharded/imgs.lst")
    lst = f"s3://{BUCKET}/sharded/imgs.lst"
    args = ["pack", lst, "--root", url, "--pass-through", "--shards", "3", "--executor", "dask",
            "--num-workers", "2", "--global-index", "--json"]  # fmt: skip
    result = json.loads(rec(*args, spool=spool).stdout)[0]
    assert (
        result["records"] == 36
        and result["global_index"] == f"s3://{BUCKET}/sharded/imgs.global.idx"
    )
    stems = [f"sharded/imgs-{i:05d}-of-00003" for i in range(3)]
    # workers wrote to the store: the shards concatenated are the unsharded pack
    joined = b"".join(get(s3, f"{stem}.rec") for stem in stems)
    assert joined == (tmp_path / "imgs.rec").read_bytes()
    assert get(s3, "sharded/imgs.global.idx") == (tmp_path / "imgs.idx").read_bytes()
    assert json.loads(get(s3, "sharded/imgs.shards.json"))["shards"][2]["records"] == 12
    # one shard lost: --resume verifies the others in the store and packs it again
    s3.delete_object(Bucket=BUCKET, Key=f"{stems[1]}.rec")
    again = json.loads(rec(*args, "--resume", spool=spool).stdout)[0]
    assert [s["skipped"] for s in again["shards"]] == [True, False, True]
    assert b"".join(get(s3, f"{stem}.rec") for stem in stems) == joined
    # another shard count leaves the old shards: the run says so
    fewer = json.loads(rec(*args[:5], "--shards", "2", "--json", spool=spool).stdout)[0]
    assert sorted(fewer["stale"]) == sorted(f"s3://{BUCKET}/{stem}.{ext}" for stem in stems
                                            for ext in ("rec", "idx"))  # fmt: skip


def test_rec_list_removes_its_stale_lists_from_the_store(
    s3: Any, tree: tuple[Path, str], tmp_path: Path
) -> None:
    _, url = tree
    spool = tmp_path / "spool"
    out = f"s3://{BUCKET}/stale/imgs"
    rec("list", url, "--recursive", "--train-ratio", "0.5", "-o", out, spool=spool)
    assert "stale/imgs_train.lst" in keys(s3, "stale/")
    rec("list", url, "--recursive", "-o", out, spool=spool)
    assert [k for k in keys(s3, "stale/") if k.endswith(".lst")] == ["stale/imgs.lst"]


def test_export_writes_shards_into_the_store(
    s3: Any, tree: tuple[Path, str], tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    pack_on_disk(tree[0], tmp_path, spool)
    pattern = f"s3://{BUCKET}/wds/imgs-%03d.tar"
    done = rec("export", str(tmp_path / "imgs.rec"), "--to", "webdataset", "-o", pattern,
               "--maxcount", "10", "--json", spool=spool)  # fmt: skip
    shards = json.loads(done.stdout)["shards"]
    assert shards == [pattern % i for i in range(4)]
    assert keys(s3, "wds/") == [f"wds/imgs-{i:03d}.tar" for i in range(4)]  # no temporary keys
    for i in range(4):
        (tmp_path / f"imgs-{i:03d}.tar").write_bytes(get(s3, f"wds/imgs-{i:03d}.tar"))
    rec("import", "webdataset", str(tmp_path / "imgs-{000..003}.tar"), "-o",
        str(tmp_path / "back"), spool=spool)  # fmt: skip
    assert (tmp_path / "back.rec").read_bytes() == (tmp_path / "imgs.rec").read_bytes()


def test_the_face_layout_publishes_its_property_file_beside_the_list(
    s3: Any, tree: tuple[Path, str], tmp_path: Path
) -> None:
    url, spool = tree[1], tmp_path / "spool"
    lst = f"s3://{BUCKET}/faces/imgs.lst"
    rec("list", url + "/", "--recursive", "-o", lst.removesuffix(".lst"), "-q", spool=spool)
    pack = ("pack", lst, "--layout", "insightface", "--pass-through", "--json")
    (result,) = json.loads(rec(*pack, spool=spool).stdout)
    assert result["identities"] == 3 and result["property"] == f"s3://{BUCKET}/faces/property"
    assert get(s3, "faces/property") == b"3,48,64\n"  # classes, height, width
    s3.put_object(Bucket=BUCKET, Key="faces/property", Body=b"7,112,112\n")
    (result,) = json.loads(rec(*pack, spool=spool).stdout)
    assert result["property"] is None and get(s3, "faces/property") == b"7,112,112\n"
    assert "says '7,112,112', not '3,48,64'; pass --overwrite" in result["property_note"]
    (result,) = json.loads(rec(*pack, "--overwrite", spool=spool).stdout)
    assert get(s3, "faces/property") == b"3,48,64\n"
