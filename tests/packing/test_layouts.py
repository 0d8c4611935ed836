"""Packing a local list in the layout its options ask for, and never
throwing away what an interrupted run left: running again without
--resume is refused (the partial output is hours of work at ImageNet's
scale) whatever the layout, and --resume or --overwrite go on."""

from __future__ import annotations

from pathlib import Path

import pytest

from im2rec.errors import DatasetError
from im2rec.packing import PackInterrupted, PackOptions, pack_list

from ..faces_data import make_faces
from .test_resuming import interrupt_after


@pytest.mark.parametrize("layout", ["plain", "insightface"])
def test_an_interrupted_run_is_refused_without_resume_or_overwrite(
    tmp_path: Path, layout: str
) -> None:
    files = make_faces(tmp_path / "imgs", [4, 3, 5])
    lst = tmp_path / "a.lst"
    lst.write_text("".join(f"{i}\t{int(p[2])}\t{p}\n" for i, p in enumerate(sorted(files))))
    options = PackOptions(pass_through=True, layout=layout)
    with pytest.raises(PackInterrupted):
        pack_list(lst, options, root=tmp_path / "imgs", on_progress=interrupt_after(5))
    partial = sorted(p.name for p in tmp_path.rglob("*.partial"))
    assert partial, "an interrupted run leaves its partial output"
    with pytest.raises(
        DatasetError, match="partial output; run the same command with --resume"
    ) as e:
        pack_list(lst, options, root=tmp_path / "imgs", overwrite=False)
    assert "--overwrite to start over" in str(e.value)
    assert sorted(p.name for p in tmp_path.rglob("*.partial")) == partial  # untouched
    result = pack_list(lst, options, root=tmp_path / "imgs", resume=True, overwrite=False)
    assert result.records == 12
    assert result.identities == (3 if layout == "insightface" else None)
