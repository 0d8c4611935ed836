"""What ``rec pack`` checks of a list before packing it, so that a mistake
that would pack silently wrong records is one clear error instead:

* a detection list (the run record of ``rec list --boxes`` says so, or its
  first line's labels are laid out as boxes) packed without
  ``--pack-label`` would keep only the first number of each label, and
  fail only at training time: refused, naming the flag;
* a list whose class map disagrees with a sibling split's
  (:func:`~im2rec.listing.classmap.disagreeing_map`) would label a class
  one way in train and another in val: refused, naming both maps, unless
  told to.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError, DatasetError, Im2RecError
from ..listing.classmap import class_map_beside, disagreeing_map
from ..listing.lstfile import iter_lst
from ..storage import is_url
from ..storage.files import read_json
from .encoding import PackOptions

__all__ = ["check_list"]


def check_list(
    lst: str | os.PathLike[str], options: PackOptions, *, allow_class_mismatch: bool = False
) -> None:
    """Refuse to pack ``lst`` as ``options`` say where the records would be
    wrong without an error (see the module doc): ConfigError (a missing
    flag) or DatasetError (class maps that disagree)."""
    if is_url(os.fspath(lst)):
        return
    if not options.pack_label:
        boxes = _holds_boxes(Path(lst))
        if boxes is not None:
            raise ConfigError(
                f"{lst}: its lines hold detection labels ({boxes}); without --pack-label only "
                "the first number of each would be stored, and training would fail on the "
                "records: pass --pack-label"
            )
    if allow_class_mismatch:
        return
    class_map = class_map_beside(lst)
    why = disagreeing_map(class_map) if class_map is not None else None
    if why is not None:
        raise DatasetError(f"{why}; --allow-class-mismatch packs it anyway")


def _holds_boxes(lst: Path) -> str | None:
    """How ``lst`` is known to hold detection labels, or None."""
    class_map = class_map_beside(lst)
    if class_map is not None:
        record = class_map.with_name(class_map.name.removesuffix(".classes.tsv") + ".lists.json")
        try:
            options = read_json(record).get("options")
        except (OSError, ValueError, AttributeError):
            options = None
        if isinstance(options, dict) and options.get("boxes"):
            return f"rec list --boxes made it, says {record.name}"
    from ..recordio.detection import MIN_LENGTH, problem

    try:
        first = next(iter_lst(lst), None)
    except Im2RecError:
        return None  # (packing names what is wrong with the list)
    if first is not None and len(first.labels) >= MIN_LENGTH and problem(first.labels) is None:
        return "its first line's labels are laid out as boxes"
    return None
