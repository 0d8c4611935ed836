"""ImageNet's validation map: the bundled one is GluonCV's, the other formats
people have read the same, a devkit that is not one and a hostile pickle
refused (never run)."""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import tarfile
from pathlib import Path
from typing import Any

import pytest

from im2rec.errors import DatasetError
from im2rec.imagenet import (
    bundled_val_map,
    load_devkit,
    load_val_map,
)

from ..imagenet_fixture import (
    WNIDS,
    FakeImagenet,
    val_name,
)

ROOT = Path(__file__).resolve().parents[2]


SHARED_PKLZ = ROOT.parent / "shared" / "data" / "imagenet_val_maps.pklz"


def test_a_hostile_pickle_is_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            import os

            return (os.system, (f"touch {marker}",))

    path = tmp_path / "evil.pklz"
    path.write_bytes(gzip.compress(pickle.dumps([["n01440764"], [Evil()]], protocol=0)))
    with pytest.raises(DatasetError, match="refers to posix.system"):
        load_val_map(path)
    assert not marker.exists()


@pytest.mark.parametrize("fmt", ["pkl", "tsv", "cntk", "valprep", "tf"])
def test_other_val_map_formats(fake: FakeImagenet, tmp_path: Path, fmt: str) -> None:
    pairs = sorted(fake.answer.items())
    path = tmp_path / f"map.{fmt}"
    if fmt == "pkl":
        path.write_bytes(pickle.dumps([WNIDS, pairs], protocol=2))
    elif fmt == "tsv":
        path.write_text("".join(f"{f}\t{w}\n" for f, w in pairs))
    elif fmt == "cntk":
        label = {w: i for i, w in enumerate(WNIDS)}
        path.write_text("".join(f"val.zip@/{f} {w}\n" for f, w in pairs))
        assert label  # the CNTK files name classes by WNID here; integer labels need a table
    elif fmt == "valprep":
        path.write_text("".join(f"mkdir -p {w}\n" for w in WNIDS)
                        + "".join(f"mv {f} {w}/\t\n" for f, w in pairs))  # fmt: skip
    else:
        path.write_text("".join(f"{w}\n" for _, w in pairs))
    assert load_val_map(path).as_dict() == fake.answer


@pytest.mark.slow
def test_the_bundled_map_is_gluoncvs(tmp_path: Path) -> None:
    vm = bundled_val_map()
    assert len(vm.pairs) == 50_000 and len(vm.wnids) == 1000
    # the SHA-1 of the canonical fname<TAB>wnid export (docs/imagenet.md, "The validation map")
    assert hashlib.sha1(vm.tsv().encode()).hexdigest() == "a9d942929c7fbbe266fcc49d0f922e6961d070a9"
    d = vm.as_dict()
    assert d[val_name(1)] == "n01751748" and d[val_name(19877)] == "n13133613"
    assert d[val_name(293)] == "n01440764" and d[val_name(50000)] == "n02437616"
    # Written back as GluonCV wrote it (Python 2, protocol 0: STRING and PUT
    # opcodes, memo numbers in order), the map is byte for byte the payload of
    # imagenet_val_maps.pklz, whose SHA-1 the spec gives (§3.3).
    parts, memo = ["(lp0\n(lp1\n"], 2
    for wnid in vm.wnids:
        parts.append(f"S'{wnid}'\np{memo}\na")
        memo += 1
    parts.append(f"a(lp{memo}\n")
    memo += 1
    for fname, wnid in vm.pairs:
        parts.append(f"(S'{fname}'\np{memo}\nS'{wnid}'\np{memo + 1}\ntp{memo + 2}\na")
        memo += 3
    payload = ("".join(parts) + "a.").encode()
    assert hashlib.sha1(payload).hexdigest() == "3226d88aed2703d0ec5d94f0bbe4ca13bbe48974"
    if SHARED_PKLZ.exists():  # the real GluonCV file, when it is beside the project
        assert load_val_map(SHARED_PKLZ).pairs == vm.pairs
        assert gzip.decompress(SHARED_PKLZ.read_bytes()) == payload


def test_a_devkit_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "devkit.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("readme.txt")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(DatasetError, match="meta.mat is missing"):
        load_devkit(path)
