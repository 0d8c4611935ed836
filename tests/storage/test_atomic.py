"""How outputs are created and published: never through a link or into a file
already there, several files appearing together or not at all, and one
process at a time on an output."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from im2rec.errors import OutputError
from im2rec.storage.atomic import (
    AtomicGroup,
    BusyError,
    exclusive,
    fresh_folder,
    own_folder,
    write_file,
)


def test_create_output_replaces_what_is_in_the_way(tmp_path: Path) -> None:
    from im2rec.errors import OutputError
    from im2rec.storage.atomic import create_output

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    link = tmp_path / "out"
    link.symlink_to(victim)
    fd = create_output(link)
    os.write(fd, b"new")
    os.close(fd)
    assert victim.read_bytes() == b"precious" and not link.is_symlink()
    assert link.read_bytes() == b"new"
    # continuing a file: a link or a hard-linked file is refused, a plain one continued
    link.unlink()
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="symlink"):
        create_output(link, append=True)
    link.unlink()
    os.link(victim, link)
    with pytest.raises(OutputError, match="hard links"):
        create_output(link, append=True)
    link.unlink()
    link.write_bytes(b"old")
    fd = create_output(link, append=True)
    os.write(fd, b"+")
    os.close(fd)
    assert link.read_bytes() == b"old+" and victim.read_bytes() == b"precious"
    # a folder in the way is an error naming it
    shutil.rmtree(tmp_path / "d", ignore_errors=True)
    (tmp_path / "d").mkdir()
    with pytest.raises(OutputError, match="folder or a symlink"):
        create_output(tmp_path / "d")
    # a dangling link and a plain file in the way are replaced; a file where
    # a folder should be is an error naming it
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for path in (dangling, victim):
        fd = create_output(path)
        os.write(fd, b"fresh")
        os.close(fd)
        assert not path.is_symlink() and path.read_bytes() == b"fresh"
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(OutputError, match="folder or a symlink"):
        create_output(victim / "below")


def test_atomic_group_cleanup_failure_keeps_the_original_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the real problem"), AtomicGroup() as group:
        tmp = group.temp_path(tmp_path / "out.txt")
        (tmp / "sub").mkdir(parents=True)  # a folder: unlink fails with an OSError
        raise ValueError("the real problem")
    assert not (tmp_path / "out.txt").exists()


def test_a_group_appears_together_or_not_at_all(tmp_path: Path) -> None:
    with AtomicGroup() as group:
        group.write_text(tmp_path / "a.txt", "a")
        group.write_bytes(tmp_path / "b.bin", b"b")
        assert not (tmp_path / "a.txt").exists()  # (nothing before the group ends)
    assert (tmp_path / "a.txt").read_text() == "a" and (tmp_path / "b.bin").read_bytes() == b"b"
    with pytest.raises(RuntimeError), AtomicGroup() as group:
        group.write_text(tmp_path / "a.txt", "changed")
        raise RuntimeError
    assert (tmp_path / "a.txt").read_text() == "a" and sorted(os.listdir(tmp_path)) == [
        "a.txt",
        "b.bin",
    ]


def test_a_locked_input_is_busy_for_a_second_holder_only(tmp_path: Path) -> None:
    lst = tmp_path / "a.lst"
    lst.write_text("")
    with exclusive(lst, "packing"):
        with pytest.raises(BusyError, match="a.lst: another process is packing it right now"):
            with exclusive(lst, "packing"):
                pass  # (flock: a second open file of the same process is refused too)
    with exclusive(lst, "packing"):
        pass  # released
    with exclusive(tmp_path / "missing.lst", "packing"):
        pass  # nothing to lock: the reader says what is wrong


def test_own_and_fresh_folders_never_reach_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("k")
    (tmp_path / "link").symlink_to(victim)
    with pytest.raises(OutputError, match="link: is a symlink where im2rec keeps a folder"):
        own_folder(tmp_path / "link")
    fresh_folder(tmp_path / "link")
    assert (tmp_path / "link").is_dir() and not (tmp_path / "link").is_symlink()
    assert (victim / "keep").read_text() == "k"
    (tmp_path / "l2").symlink_to(victim / "keep")
    write_file(tmp_path / "l2", "new")
    assert (tmp_path / "l2").read_text() == "new" and (victim / "keep").read_text() == "k"
