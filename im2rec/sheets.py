"""Contact sheets: a grid of thumbnails from a ``.rec``, each captioned with
its key and label; the quick look before training."""

from __future__ import annotations

import io
import math
import os
import random
from pathlib import Path

from PIL import Image, ImageDraw, ImageOps

from .atomic import AtomicGroup
from .errors import DatasetError
from .imaging import DECODE_ERRORS
from .inspection import Damage, walk_records
from .recordio import RecordReader, read_record, unpack

__all__ = ["contact_sheet"]

_CAPTION = 14  # pixels under each thumbnail


def contact_sheet(
    rec: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    n: int = 64,
    shuffle: bool = False,
    label: float | None = None,
    seed: int = 0,
    thumb: int = 128,
) -> tuple[int, tuple[int, int]]:
    """Write a PNG grid of up to ``n`` records (the first ones, a seeded random
    sample with ``shuffle``, only those labelled ``label`` if given). Returns
    ``(records shown, image size)``. Payloads that are not images get a grey
    tile saying so."""
    if n < 1:
        raise DatasetError(f"-n must be at least 1, got {n}")
    reader = RecordReader(rec)
    buf, _ = reader.mapping()
    chosen = []
    for item in walk_records(reader):
        if isinstance(item, Damage):
            continue
        header, payload = unpack(read_record(buf, item[0], item[1], reader.name)[0])
        first = header.label[0] if header.flag else header.label
        if label is None or float(first) == label:
            chosen.append((header, payload))
        if not shuffle and len(chosen) >= n:
            break
    if not chosen:
        raise DatasetError(
            f"{reader.name}: no records{'' if label is None else f' with label {label:g}'} to show"
        )
    if shuffle and len(chosen) > n:
        chosen = random.Random(seed).sample(chosen, n)
    cols = math.ceil(math.sqrt(len(chosen)))
    rows = math.ceil(len(chosen) / cols)
    sheet = Image.new("RGB", (cols * thumb, rows * (thumb + _CAPTION)), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (header, payload) in enumerate(chosen):
        x, y = (i % cols) * thumb, (i // cols) * (thumb + _CAPTION)
        try:
            with Image.open(io.BytesIO(payload)) as im:
                tile = ImageOps.contain(
                    ImageOps.exif_transpose(im).convert("RGB"), (thumb - 4, thumb - 4)
                )
            sheet.paste(tile, (x + (thumb - tile.width) // 2, y + (thumb - tile.height) // 2))
        except DECODE_ERRORS:
            draw.rectangle((x + 2, y + 2, x + thumb - 3, y + thumb - 3), fill="#999999")
            draw.text((x + 6, y + thumb // 2 - 6), "not an image", fill="white")
        shown = header.label.tolist() if header.flag else header.label
        text = f"{header.id}: {shown:g}" if not header.flag else f"{header.id}: {shown}"
        draw.text((x + 3, y + thumb), text[: thumb // 6], fill="black")
    with AtomicGroup() as group:
        sheet.save(group.temp_path(Path(out)), "PNG")
    return len(chosen), sheet.size
