"""The order identities are packed in: a list grouped by identity keeps its own
order."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.packing import pack_list

from ..faces_data import FACES, check_layout, make_faces, rec, records

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow


def test_a_grouped_list_is_packed_in_its_own_order(tmp_path: Path) -> None:
    # (rec list without shuffling writes identities together: the plan then
    # holds nothing a line, and the staging list is the list read again)
    from im2rec.packing.faces_plan import plan_identities

    files = make_faces(tmp_path / "faces", [2, 3, 1])
    done = rec("list", "faces", "--recursive", "--no-shuffle", "-o", "faces", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lst = tmp_path / "faces.lst"
    assert plan_identities(lst).interleaved is None
    (tmp_path / "faces" / "id1" / "001.jpg").unlink()  # fails: missing
    result = pack_list(lst, FACES)
    assert (result.records, result.identities) == (5, 3)
    ranges = check_layout(lst.with_suffix(".rec"), 5, 3)
    assert [identity for identity, _, _ in ranges] == [0, 1, 2]
    got = records(lst.with_suffix(".rec"))
    paths = [line.split("\t")[2] for line in lst.read_text().splitlines()]
    assert [got[k][1] for k in range(1, 6)] == [files[p] for p in paths if p != "id1/001.jpg"]
    report = lst.with_suffix(".failures.tsv").read_text().splitlines()
    assert report[1].startswith(f"{paths.index('id1/001.jpg') + 1}\t")
