"""Walking a bucket prefix as a folder is walked: the same lists from a store
as from disk, and keys that are no plain paths never becoming list lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..s3server import BUCKET
from ..storage.test_remote import rec


@pytest.mark.slow
def test_rec_list_walks_a_bucket_prefix_like_a_folder(s3: Any, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    files = ["cats/a.jpg", "cats/b.JPG", "cats/deep/c.png", "dogs/d.jpeg", "dogs/notes.txt",
             "root.jpg", "z/.hidden.jpg", "z/e.jpg"]  # fmt: skip
    for name in files:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(b"x")
        s3.put_object(Bucket=BUCKET, Key=f"tree/{name}", Body=b"x")
    for extra in (["--recursive"], [], ["--recursive", "--train-ratio", "0.5"]):
        local = rec("list", str(tree), "-o", str(tmp_path / "local"), "-q", *extra)
        assert local.returncode == 0, local.stderr
        done = rec("list", f"s3://{BUCKET}/tree/", "-o", f"s3://{BUCKET}/lists/tree", "-q", *extra)
        assert done.returncode == 0, done.stderr
        for path in sorted(tmp_path.glob("local*")):
            key = "lists/tree" + path.name[len("local") :]
            got = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            if path.suffix == ".json":  # records the root: the URL instead of the folder
                assert (
                    json.loads(got)["lists"][0]["images"]
                    == json.loads(path.read_text())["lists"][0]["images"]
                )
            else:
                assert got == path.read_bytes(), path.name
    done = rec("list", f"s3://{BUCKET}/nothing-here/", "-o", str(tmp_path / "x"))
    assert done.returncode == 1 and "no objects under this prefix" in done.stderr


@pytest.mark.slow
def test_bucket_keys_that_climb_out_never_become_list_lines(s3: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from im2rec.cli import main

    client, bucket = s3, "data"
    jpeg = b"\xff\xd8\xff\xd9"
    for key in ("keys/cats/a.jpg", "keys/cats/../../../escape.jpg", "keys/dogs//b.jpg",
                "keys/./c.jpg", "keys/dogs/ok.jpg", "keys/../x/d.jpg"):  # fmt: skip
        client.put_object(Bucket=bucket, Key=key, Body=jpeg)
    out = tmp_path / "keys"
    result = CliRunner().invoke(
        main, ["list", f"s3://{bucket}/keys", "-o", str(out), "--recursive", "--no-shuffle"]
    )
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "keys.lst").read_text().splitlines()
    paths = sorted(line.split("\t")[2] for line in lines)
    assert paths == ["cats/a.jpg", "dogs/ok.jpg"]
    report = (tmp_path / "keys.skipped.tsv").read_text()
    assert "cats/../../../escape.jpg" in report and "dogs//b.jpg" in report
