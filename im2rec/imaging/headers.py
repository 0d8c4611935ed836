"""What a payload's first bytes say (its format, its size, a JPEG's frame)
without decoding it: cheap enough for every record of ``rec info``,
``rec unpack`` and ``rec export``."""

from __future__ import annotations

__all__ = ["image_extension", "image_size", "jpeg_frame"]

_SIGNATURES = (
    (b"\xff\xd8\xff", ".jpg"), (b"\x89PNG\r\n\x1a\n", ".png"), (b"GIF8", ".gif"),
    (b"BM", ".bmp"), (b"RIFF", ".webp"),
)  # fmt: skip


def image_extension(payload: bytes) -> str | None:
    """``.jpg``, ``.png``, ... from the payload's signature; None if unknown."""
    for signature, ext in _SIGNATURES:
        if payload.startswith(signature):
            return ext
    return None


def jpeg_frame(data: bytes | memoryview) -> tuple[int, int, int] | None:
    """``(height, width, components)`` from a JPEG's start-of-frame header,
    found by walking its markers (no decoding); None if not a JPEG or none
    is found."""
    if data[:2] != b"\xff\xd8":
        return None
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            if pos + 10 > len(data):
                return None
            return (
                int.from_bytes(data[pos + 5 : pos + 7], "big"),
                int.from_bytes(data[pos + 7 : pos + 9], "big"),
                data[pos + 9],
            )
        pos += 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
    return None


def image_size(data: bytes | memoryview) -> tuple[int, int] | None:
    """``(height, width)`` of an image as stored (EXIF orientation not
    applied), from its header: JPEG and PNG directly, other formats through
    Pillow (header only); None when it is not a readable image."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        return int.from_bytes(data[20:24], "big"), int.from_bytes(data[16:20], "big")
    frame = jpeg_frame(data)
    if frame is not None:
        return frame[0], frame[1]
    from ..imaging.codec import DECODE_ERRORS, open_image

    try:
        with open_image(bytes(data)) as im:
            return im.height, im.width
    except DECODE_ERRORS:  # (Im2RecError among them)
        return None
