"""The devkit's MAT-file reader: a damaged file is one clear error."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from im2rec.errors import DatasetError
from im2rec.imagenet.matfile import read_mat

from .test_damage_imagenet import SETTINGS, damaged


@SETTINGS
@given(data=st.data())
def test_damaged_mat_file(sides: dict[str, bytes], data: st.DataObject) -> None:
    try:
        read_mat(data.draw(damaged(sides["meta"])), "meta.mat")
    except DatasetError:
        pass
