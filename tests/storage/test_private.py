"""Folders and files of this user's own (the caches): where they are, a
folder used only when nobody else could write into it, and a file read
back only when it is a regular file of this user's with one link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from im2rec.errors import OutputError
from im2rec.storage.private import cache_home, open_own, private_folder


def test_the_cache_home_is_the_variable_then_xdg_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IM2REC_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_home() == tmp_path / "mine"
    monkeypatch.delenv("IM2REC_CACHE_DIR")
    assert cache_home() == tmp_path / "xdg" / "im2rec"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_home() == tmp_path / "home" / ".cache" / "im2rec"


def test_a_missing_folder_is_made_for_this_user_alone(tmp_path: Path) -> None:
    folder = private_folder(tmp_path / "a" / "b" / "cache")
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o700
    assert private_folder(folder) == folder  # (and found again as it is)


@pytest.mark.parametrize("planted", ["symlink", "file", "writable by others"])
def test_a_folder_others_could_plant_into_is_refused_by_name(tmp_path: Path, planted: str) -> None:
    folder = tmp_path / "cache"
    if planted == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "elsewhere")
    elif planted == "file":
        folder.write_bytes(b"")
    else:
        folder.mkdir()
        folder.chmod(0o777)
    with pytest.raises(OutputError, match=f"{folder}: .*another user") as caught:
        private_folder(folder)
    assert ("chmod go-w" in str(caught.value)) == (planted == "writable by others")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_a_folder_of_another_users_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    os.chown(folder, 4242, -1)
    with pytest.raises(OutputError, match="belongs to another user \\(uid 4242\\)"):
        private_folder(folder)


def test_only_a_plain_file_of_ones_own_is_opened(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.write_bytes(b"x")
    fd = open_own(own)
    assert fd is not None and os.read(fd, 2) == b"x"
    os.close(fd)
    (tmp_path / "link").symlink_to(own)
    os.mkfifo(tmp_path / "fifo")
    assert open_own(tmp_path / "link") is None  # (never followed)
    assert open_own(tmp_path / "fifo") is None  # (and never waited on)
    assert open_own(tmp_path / "missing") is None
    os.link(own, tmp_path / "second name")
    assert open_own(own) is None  # another name of it could be written elsewhere


def test_a_name_is_opened_in_the_folder_given(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"y")
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        fd = open_own("f", dir_fd=folder)
        assert fd is not None
        os.close(fd)
    finally:
        os.close(folder)
