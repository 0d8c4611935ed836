"""One image to one record: :class:`Encoder` reads the file (or fetches it
from a store), re-encodes it unless ``--pass-through``, and prepends the
header. A bad image is a :class:`Failure` (data, not an exception)."""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import (
    ConfigError,
    Im2RecError,
    ImageCodecError,
    ImageTooLargeError,
    MissingFileError,
)
from ..listing.lstfile import ListItem
from ..recordio import MAX_RECORD_SIZE, IRHeader, pack
from ..recordio.framing import needs_split
from ..storage import is_url
from ..storage.files import NOT_REGULAR, open_regular
from ..storage.objects import url_join

MAX_SIDE = 65_535


@dataclass(frozen=True)
class PackOptions:
    """How images become records; defaults are im2rec.py's."""

    pass_through: bool = False
    pack_label: bool = False
    resize: int = 0
    center_crop: bool = False
    quality: int = 95
    encoding: str = ".jpg"
    color: int = 1
    #: "plain" (im2rec.py's records) or "insightface" (face2rec2.py's layout)
    layout: str = "plain"

    def as_state(self) -> dict[str, Any]:
        """The options as a manifest records them (the plain layout unnamed,
        so outputs packed before layouts existed still match)."""
        state = dataclasses.asdict(self)
        if state["layout"] == "plain":
            del state["layout"]
        return state

    def __post_init__(self) -> None:
        if self.layout not in ("plain", "insightface"):
            raise ConfigError(f"--layout must be plain or insightface, got {self.layout!r}")
        if self.encoding not in (".jpg", ".png"):
            raise ConfigError(f"--encoding must be .jpg or .png, got {self.encoding!r}")
        if self.color not in (-1, 0, 1):
            raise ConfigError(f"--color must be 1, 0 or -1, got {self.color}")
        if not 0 <= self.resize <= MAX_SIDE:
            raise ConfigError(
                f"--resize must be 0 (keep) or a size up to {MAX_SIDE:,} (the most a JPEG "
                f"side can be), got {self.resize}"
            )
        if not 0 <= self.quality <= 100:
            raise ConfigError(f"--quality must be between 0 and 100, got {self.quality}")
        if self.pass_through:
            changed = [
                flag
                for flag, value, default in (
                    ("--resize", self.resize, 0),
                    ("--center-crop", self.center_crop, False),
                    ("--quality", self.quality, 95),
                    ("--encoding", self.encoding, ".jpg"),
                    ("--color", self.color, 1),
                )  # fmt: skip
                if value != default
            ]
            if changed:
                raise ConfigError(
                    f"--pass-through stores the files unchanged, so {', '.join(changed)} "
                    "cannot apply; drop one or the other"
                )


@dataclass(frozen=True)
class Failure:
    """Why one image was not packed."""

    #: missing | unreadable | undecodable | decompression-bomb | output-too-large |
    #: record-too-large
    reason: str
    detail: str


class Packed(NamedTuple):
    """One image's record, as a worker made it: the header (and any labels),
    the image bytes, and whether the record must be written split (the
    worker scans it for magic words, so the writer does not)."""

    header: bytes
    image: bytes
    split: bool


@dataclass(frozen=True)
class Encoder:
    """The per-image stage; runs in worker processes (it is picklable)."""

    options: PackOptions
    root: str

    def __call__(self, item: ListItem) -> Packed | Failure:
        return self.encode(item, self.read(item))

    def read(self, item: ListItem) -> bytes | Failure:
        """The image file's bytes (from the store when the root is a URL)."""
        if is_url(self.root):
            return _fetch(url_join(self.root, item.path))
        try:
            return _read_file(os.path.join(self.root, item.path))
        except FileNotFoundError:
            return Failure("missing", "no such file")
        except OSError as exc:
            return Failure("unreadable", exc.strerror or str(exc))

    def encode_read(self, pair: tuple[ListItem, bytes | Failure]) -> Packed | Failure:
        """:meth:`encode` of what :meth:`read` returned (read elsewhere)."""
        return self.encode(*pair)

    def encode(self, item: ListItem, data: bytes | Failure) -> Packed | Failure:
        if isinstance(data, Failure):
            return data
        labels = item.labels
        label: Any = list(labels) if self.options.pack_label and len(labels) > 1 else labels[0]
        if not self.options.pass_through:
            encoded = _reencode(data, self.options)
            if isinstance(encoded, Failure):
                return encoded
            data = encoded
        # The header (and any labels) and the image stay two buffers: the
        # writer hands both to the kernel, so the image is never copied.
        header = pack(IRHeader(0, label, item.key, 0), b"")
        if too_large := _too_large(len(header) + len(data)):
            return too_large
        return Packed(header, data, needs_split(header, data))


def _too_large(size: int, more: bool = False) -> Failure | None:
    """The failure of an image whose record would hold ``size`` bytes (or,
    with ``more``, at least that many), or None when a record holds it."""
    if size < MAX_RECORD_SIZE:
        return None
    return Failure(
        "record-too-large", f"{'over ' if more else ''}{size:,} bytes; RecordIO stores < 2**29"
    )


def _fetch(url: str) -> bytes | Failure:
    from ..storage.objects import fetch

    try:
        data = fetch(url, MAX_RECORD_SIZE)
    except MissingFileError:
        return Failure("missing", "no such object")
    except Im2RecError as exc:  # refused, or failed after retries
        return Failure("unreadable", str(exc))
    return _too_large(len(data), more=True) or data


def _read_file(path: str) -> bytes | Failure:
    """The file's bytes; a FIFO or device (a .lst can name anything) is a
    failure, not a read that waits forever or never ends, and a file too
    large for a record is refused before it is read."""
    try:
        fd, size = open_regular(path)
    except Im2RecError:
        return Failure("unreadable", NOT_REGULAR)
    try:
        if too_large := _too_large(size):
            return too_large
        # os-level reads: no file object per image. One byte more than the
        # size tells a file that grew since fstat from one that did not.
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        parts = [data]
        while more := os.read(fd, 1 << 20):
            parts.append(more)
        data = b"".join(parts)
        return _too_large(len(data)) or data
    finally:
        os.close(fd)


def _reencode(data: bytes, o: PackOptions) -> bytes | Failure:
    # Pillow is imported only when images are re-encoded: --pass-through
    # starts without it.
    from PIL import Image

    from ..imaging.regions import transcode

    try:
        with warnings.catch_warnings():
            # Pillow warns between its pixel limit and twice it; both are bombs here.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return transcode(
                data, color=o.color, resize=o.resize, center_crop=o.center_crop,
                img_fmt=o.encoding, quality=o.quality,
            )  # fmt: skip
    except ImageTooLargeError as exc:
        return Failure("output-too-large" if exc.output else "decompression-bomb", str(exc))
    except ImageCodecError as exc:
        return Failure("undecodable", str(exc))
