"""Contact sheets: a grid of thumbnails from a ``.rec``, each captioned with
its key and label (a detection label's boxes drawn on the image); the
quick look before training."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping
from pathlib import Path

from PIL import Image, ImageDraw, ImageOps

from ..errors import ConfigError, DatasetError, ImageTooLargeError
from ..imaging.codec import DECODE_ERRORS, Upright, check_pixels
from ..recordio import IRHeader, RecordReader, read_record, unpack
from ..recordio.detection import kept, problem, read_label
from ..recordio.walking import Damage, header_at, walk_records
from ..storage.atomic import AtomicGroup

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
    classes: Mapping[int, str] | None = None,
) -> tuple[int, tuple[int, int]]:
    """Write a grid of up to ``n`` records (the first ones, a seeded random
    sample with ``shuffle``, only those labelled ``label`` if given) in the
    format ``out``'s suffix names (``.png``, ``.jpg``, ``.webp``...).
    Returns ``(records shown, image size)``. Payloads that are not images
    get a grey tile saying so. With ``classes`` (label -> name, a class
    map), single labels are captioned by name. A detection label's boxes
    are drawn on its image, each with its class's name.

    The sheet's size is checked against the pixel limit before anything is
    drawn, and only record offsets are kept while choosing (8 bytes each),
    so a random sample of a 100 GB file needs no more memory than ``n``
    records."""
    if n < 1:
        raise ConfigError(f"-n must be at least 1, got {n}")
    if thumb < 16:
        raise ConfigError(f"--size must be at least 16 pixels, got {thumb}")
    fmt = _sheet_format(Path(out))
    cols = math.ceil(math.sqrt(n))
    check = (cols * thumb, math.ceil(n / cols) * (thumb + _CAPTION))
    try:
        check_pixels(check, "a contact sheet", output=True)
    except ImageTooLargeError as exc:
        raise ConfigError(f"{exc}; show fewer records (-n) or smaller tiles (--size)") from None
    reader = RecordReader(rec)
    buf, size = reader.mapping()
    chosen = _choose(reader, n, shuffle, label, random.Random(seed))
    if not chosen:
        raise DatasetError(
            f"{reader.name}: no records{'' if label is None else f' with label {label:g}'} to show"
        )
    cols = math.ceil(math.sqrt(len(chosen)))
    rows = math.ceil(len(chosen) / cols)
    sheet = Image.new("RGB", (cols * thumb, rows * (thumb + _CAPTION)), "white")
    draw = ImageDraw.Draw(sheet)
    for i, head in enumerate(chosen):
        x, y = (i % cols) * thumb, (i // cols) * (thumb + _CAPTION)
        header, payload = unpack(read_record(buf, head, size, reader.name)[0])
        try:
            tile = _thumbnail(payload, thumb - 4)
            at = (x + (thumb - tile.width) // 2, y + (thumb - tile.height) // 2)
            sheet.paste(tile, at)
            if header.flag and problem(header.label) is None:
                _draw_boxes(draw, read_label(header.label).objects, at, tile.size, classes)
        except ImageTooLargeError:
            _grey_tile(draw, x, y, thumb, "too large")
        except DECODE_ERRORS:
            _grey_tile(draw, x, y, thumb, "not an image")
        text = f"{header.id}: {_caption(header, classes)}"[: thumb // 6]
        _text(draw, (x + 3, y + thumb), text, "black")
    with AtomicGroup() as group:
        with group.open(out) as f:
            sheet.save(f, fmt)
    return len(chosen), sheet.size


#: box colours, a class each (cycled)
_COLOURS = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6",
            "#bfef45", "#469990", "#9a6324")  # fmt: skip


def _draw_boxes(
    draw: ImageDraw.ImageDraw,
    objects: object,
    at: tuple[int, int],
    size: tuple[int, int],
    classes: Mapping[int, str] | None,
) -> None:
    """Each box that MXNet keeps, on the tile at ``at`` of ``size``, with its
    class's name (or number) at its top left corner."""
    import numpy as np

    rows = np.asarray(objects)
    for cls, x0, y0, x1, y1 in rows[kept(rows)][:, :5].tolist():
        box = (
            at[0] + x0 * size[0],
            at[1] + y0 * size[1],
            at[0] + x1 * size[0],
            at[1] + y1 * size[1],
        )
        colour = _COLOURS[int(cls) % len(_COLOURS)]
        draw.rectangle(box, outline=colour, width=2)
        name = classes.get(int(cls), f"{cls:g}") if classes else f"{cls:g}"
        _text(draw, (box[0] + 2, box[1] + 1), name[:16], colour)


def _text(draw: ImageDraw.ImageDraw, at: tuple[float, float], text: str, fill: str) -> None:
    try:
        draw.text(at, text, fill=fill)
    except UnicodeEncodeError:  # Pillow without FreeType draws Latin-1 only
        draw.text(at, text.encode("latin-1", "replace").decode("latin-1"), fill=fill)


def _caption(header: IRHeader, classes: Mapping[int, str] | None) -> str:
    if header.flag and problem(header.label) is None:
        count = int(kept(read_label(header.label).objects).sum())
        return f"{count} object{'' if count == 1 else 's'}"
    if header.flag:
        return str(header.label.tolist())
    value = float(header.label)
    if classes and value.is_integer() and int(value) in classes:
        return classes[int(value)]
    return f"{value:g}"


def _sheet_format(out: Path) -> str:
    Image.init()
    fmt = Image.registered_extensions().get(out.suffix.lower())
    if fmt is None or fmt in ("PDF", "EPS", "PALM", "XBM", "MSP"):
        why = f"cannot tell an image format from {out.suffix or 'no suffix'!r}"
    elif fmt not in Image.SAVE:
        why = f"this Pillow cannot write {fmt} (it was built without it)"
    else:
        return fmt
    raise ConfigError(f"-o {out}: {why}; name the sheet .png or .jpg")


def _choose(
    reader: RecordReader, n: int, shuffle: bool, label: float | None, rng: random.Random
) -> list[int]:
    """Offsets of the records to show: the first ``n`` that match, or a
    reservoir sample of ``n`` of them (each as likely), in file order."""
    buf, size = reader.mapping()
    chosen: list[int] = []
    seen = 0
    for item in walk_records(reader):
        if isinstance(item, Damage):
            continue
        if label is not None:
            header = header_at(buf, item[0], item[1], reader.name)
            first = header.label[0] if header.flag else header.label
            if float(first) != label:
                continue
        seen += 1
        if len(chosen) < n:
            chosen.append(item[0])
            if not shuffle and len(chosen) == n:
                break
        else:
            slot = rng.randrange(seen)
            if slot < n:
                chosen[slot] = item[0]
    return sorted(chosen) if shuffle else chosen


def _thumbnail(payload: bytes, side: int) -> Image.Image:
    from ..imaging.columns import SCALARS
    from ..imaging.jpeg import dct_scale

    with Upright(payload) as upright:  # decoded at 1/2..1/8 scale: less time and memory
        width, height = upright.size
        upright.draft("RGB", dct_scale(SCALARS, width, height, width, height, (side, side)))
        return ImageOps.contain(upright.load().convert("RGB"), (side, side))


def _grey_tile(draw: ImageDraw.ImageDraw, x: int, y: int, thumb: int, text: str) -> None:
    draw.rectangle((x + 2, y + 2, x + thumb - 3, y + thumb - 3), fill="#999999")
    draw.text((x + 6, y + thumb // 2 - 6), text, fill="white")
