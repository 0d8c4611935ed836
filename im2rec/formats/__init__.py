"""Layouts and formats beside plain RecordIO: InsightFace's face layout
(:mod:`.insightface`, :mod:`.faces_pack`) and WebDataset tar shards
(:mod:`.webdataset`, :mod:`.tars`)."""

from __future__ import annotations

__all__ = ["image_extension"]

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
