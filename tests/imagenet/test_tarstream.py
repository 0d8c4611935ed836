"""Extracting members from the ImageNet tars: a full disk keeps the work done
for --resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.imagenet import (
    prepare_imagenet,
)

from ..imagenet_fixture import (
    FakeImagenet,
)
from .test_preparing import options, tree


def test_a_full_disk_keeps_the_work_for_resume(
    fake: FakeImagenet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from im2rec.errors import Im2RecError
    from im2rec.imagenet import tarstream

    real, calls = tarstream._write, [0]

    def write(path: Path, data: bytes) -> None:
        calls[0] += 1
        if calls[0] == 5:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(tarstream, "_write", write)
    with pytest.raises(Im2RecError, match="No space left on device.*--resume"):
        prepare_imagenet(options(fake, tmp_path / "t"))
    monkeypatch.setattr(tarstream, "_write", real)
    prepare_imagenet(options(fake, tmp_path / "t", resume=True))
    assert tree(tmp_path / "t") == fake.expected_tree()
