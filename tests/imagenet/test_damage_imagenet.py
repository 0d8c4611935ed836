"""Damaged ImageNet side files, generated: the val map (pklz), the devkit
(its .tar.gz, and the meta.mat and ground truth inside it) fail only with a
clear ``DatasetError``, never another exception."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from im2rec.errors import DatasetError
from im2rec.imagenet.valmap import DEVKIT_META, DEVKIT_TRUTH, load_devkit, load_val_map

pytest.importorskip("scipy")  # writes the fake devkit's meta.mat

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    if draw(st.booleans()):
        return data[: draw(st.integers(0, len(data) - 1))]
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    return bytes(out)


def devkit_with(meta: bytes, truth: bytes, path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in ((DEVKIT_META, meta), (DEVKIT_TRUTH, truth)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def only_dataset_errors(load: object, path: Path) -> None:
    try:
        load(path)  # type: ignore[operator]
    except DatasetError:
        pass


@SETTINGS
@given(data=st.data(), inside=st.booleans())
@pytest.mark.slow
def test_damaged_val_map(
    sides: dict[str, bytes], tmp_path: Path, data: st.DataObject, inside: bool
) -> None:
    path = tmp_path / "map.pklz"
    if inside:  # the pickle damaged, then compressed again: the unpickler sees it
        pickled = gzip.decompress(sides["pklz"])
        path.write_bytes(gzip.compress(data.draw(damaged(pickled))))
    else:
        path.write_bytes(data.draw(damaged(sides["pklz"])))
    only_dataset_errors(load_val_map, path)


@SETTINGS
@given(data=st.data(), part=st.sampled_from(["devkit", "meta", "truth"]))
@pytest.mark.slow
def test_damaged_devkit(
    sides: dict[str, bytes], tmp_path: Path, data: st.DataObject, part: str
) -> None:
    path = tmp_path / "devkit.tar.gz"
    if part == "devkit":
        path.write_bytes(data.draw(damaged(sides["devkit"])))
    elif part == "meta":
        devkit_with(data.draw(damaged(sides["meta"])), sides["truth"], path)
    else:
        devkit_with(sides["meta"], data.draw(damaged(sides["truth"])), path)
    only_dataset_errors(load_devkit, path)
