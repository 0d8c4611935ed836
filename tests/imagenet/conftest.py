"""Fixtures the tests of imagenet share."""

from __future__ import annotations

import tarfile

import pytest

from im2rec.imagenet.valmap import DEVKIT_META, DEVKIT_TRUTH

from ..imagenet_fixture import (
    FakeImagenet,
)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The pklz and the devkit, and the devkit's two members unpacked."""
    folder = tmp_path_factory.mktemp("sides")
    fake = FakeImagenet(folder)
    pklz = fake.write_pklz(folder / "imagenet_val_maps.pklz").read_bytes()
    devkit = fake.write_devkit(folder / "ILSVRC2012_devkit_t12.tar.gz")
    with tarfile.open(devkit) as tar:
        meta = tar.extractfile(DEVKIT_META).read()  # type: ignore[union-attr]
        truth = tar.extractfile(DEVKIT_TRUTH).read()  # type: ignore[union-attr]
    return {"pklz": pklz, "devkit": devkit.read_bytes(), "meta": meta, "truth": truth}
