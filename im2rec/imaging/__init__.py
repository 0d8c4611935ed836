"""Pixels: decoding, resizing and encoding images, and what a payload's
header says without decoding it.

Modules: :mod:`.codec` (Pillow(-SIMD) with OpenCV's conventions, the pixel
limit, the one EXIF policy), :mod:`.headers` (format, size and JPEG frame
from the first bytes), :mod:`.jpeg` (only the region of a JPEG a crop keeps,
through the optional ``_jpeg`` extension over libjpeg-turbo),
:mod:`.regions` (decode_region and transcode, choosing between the two),
and the optional ``_tensor`` extension (8-bit pixels to normalised planes).
Nothing here knows about records, lists or training.
"""
