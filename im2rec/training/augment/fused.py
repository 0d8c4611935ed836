"""The usual training recipe in one pass: decode the JPEG region a crop
keeps, resample it once, and write normalised float32 planes straight from
the decoder's pixels.

This is :meth:`Augmenter.write <im2rec.training.augment.Augmenter.write>` for float32
(or uint8) output without photometric changes, a mean image or random contrast and
illumination, on JPEG data the region decoder takes. The general path
decodes into a Pillow image, makes an ``(H, W, C)`` array of it and
normalises that with three numpy passes over a strided view; here the
decoder writes four-byte RGBX pixels, and :mod:`im2rec.imaging._tensor`
resamples them (with Pillow-SIMD's arithmetic, in its own C) and casts,
scales, shifts and mirrors each output row into the planes while it is in
cache, with the same float32 operations in the same order as numpy.

The output is the general path's: identical beside Pillow-SIMD (tested);
beside plain Pillow, within two levels for the bilinear and Hamming filters
that this path resamples itself, identical for the others, which Pillow
resamples here too (:func:`_ours`). Plain Pillow's resampling is the slow
part of the general path: with it, this path is about twice as fast
(docs/performance.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

from ... import native
from ...errors import ImageCodecError
from ...imaging import jpeg
from ...imaging.codec import Plan, pillow_simd, pixel_limit

# (None: built without a compiler, or switched off: numpy normalises)
_tensor: Any = native.load("tensor")
# (None: no region decoder; crop() is in it, using _tensor's C table)
_jpeg: Any = native.load("jpeg") if _tensor is not None else None

__all__ = ["Writer", "available", "codec_error", "crop", "crop_plan", "write"]


def _ours() -> frozenset[Image.Resampling]:
    """The filters resampled by :mod:`~im2rec.imaging._tensor` (its bytes are
    Pillow-SIMD's): all four convolutions beside Pillow-SIMD; beside plain
    Pillow, bilinear and Hamming (no negative weights: within two levels of
    Pillow's, one a pass), not the cubic and Lanczos filters, whose overshoot Pillow-SIMD's
    16-bit weights round otherwise (up to tens of levels on noise)."""
    R = Image.Resampling
    cubic = (R.BICUBIC, R.LANCZOS) if pillow_simd() else ()
    return frozenset((R.BILINEAR, R.HAMMING, *cubic))


#: (nearest and box steps are Pillow's, on the whole image's canvas: jpeg.Window.finish)
_OURS = _ours()


def available() -> bool:
    """Whether the one-pass path is built and switched on."""
    return _tensor is not None and jpeg.enabled()


def crop_plan(
    channels: int,
    size: tuple[int, int],
    resize: int,
    area: tuple[float, float],
    ratio: tuple[float, float],
    mirror: tuple[bool, bool],
    method: Image.Resampling,
    coef: tuple[list[float], list[float]] | None,
) -> Any:
    """The options of :func:`crop` for a random-resized crop to ``size``
    (``mirror``: random, always; ``coef``: the normaliser's ``k`` and ``mk``,
    None for uint8), or None where the C path does not take them: not built,
    a filter it does not resample as Pillow (:data:`_OURS`), or sizes past
    what it checks (a resize above 32,768, an area or aspect range that
    overflows; the Python path takes those)."""
    if (
        _jpeg is None
        or not hasattr(_jpeg, "crop")
        or method not in _OURS
        or channels not in (1, 3)
        or resize > 1 << 15
        or area[1] > 1e6
        or not 1e-9 <= ratio[0] <= ratio[1] <= 1e9
    ):
        return None
    k, mk = coef if coef is not None else (None, None)
    return _jpeg.crop_plan(channels, size[0], size[1], resize, *area, *ratio, *mirror,
                           int(method), k, mk)  # fmt: skip


def crop(
    plan: Any, payload: bytes | memoryview, out: np.ndarray, rng: np.random.Generator
) -> bool | tuple[bool, tuple[float, float, float, float]] | None:
    """Augmenter.write's whole one-pass path in one C call: the mirror and
    the random-resized crop drawn from ``rng`` (numpy's own draws, the same
    stream), the JPEG region decoded and resampled into ``out``. True when
    done; None, with nothing drawn, where the Python path is to run instead
    (not a JPEG the region decoder takes, over the pixel limit); ``(flip,
    box)`` when the draws are made but the resampler leaves the sample to
    Pillow (the caller finishes it with them)."""
    crop_one = cropper(plan, rng)
    return None if crop_one is None else crop_one(payload, out)


def cropper(
    plan: Any, rng: np.random.Generator
) -> Callable[[bytes | memoryview, np.ndarray], Any] | None:
    """:func:`crop` for a batch of samples drawn from ``rng``, with the
    switch (``IM2REC_NATIVE_JPEG``) and the pixel limit read once; None
    where there is no plan or the region decoder is off."""
    if plan is None or not jpeg.enabled():
        return None
    native_crop, bits, limit = _jpeg.crop, rng.bit_generator, pixel_limit()

    def crop_one(payload: bytes | memoryview, out: np.ndarray) -> Any:
        try:
            return native_crop(plan, payload, out, bits, limit)
        except ValueError as exc:
            raise codec_error(str(exc)) from exc

    return crop_one


def codec_error(why: str) -> ImageCodecError:
    """What :func:`crop` raises when the decoder fails on a sample."""
    return ImageCodecError(f"cannot decode image: {why}")


#: what the rest of Augmenter.write does after :func:`crop`: (done, payload, out, rng)
Rest = Callable[[Any, "bytes | memoryview", np.ndarray, np.random.Generator], None]


class Writer:
    """What :meth:`Augmenter.writer <im2rec.training.augment.Augmenter.writer>`
    returns: ``write(payload, out)`` is ``Augmenter.write`` with one
    generator, what it looks up for every sample looked up once; for a
    batch read straight from the ``.rec``, :meth:`records` runs the C loop
    over many samples and :meth:`finish` completes one it stopped at."""

    __slots__ = ("_crop", "_plan", "_rest", "_rng")

    def __init__(self, plan: Any, rest: Rest, rng: np.random.Generator) -> None:
        self._crop, self._plan, self._rest, self._rng = cropper(plan, rng), plan, rest, rng

    def __call__(self, payload: bytes | memoryview, out: np.ndarray) -> None:
        done = self._crop(payload, out) if self._crop is not None else None
        if done is not True:
            self._rest(done, payload, out, self._rng)

    @property
    def batched(self) -> bool:
        """Whether :meth:`records` can run (the C crop is on)."""
        return self._crop is not None and hasattr(_jpeg, "crop_batch")

    def records(
        self,
        fd: int,
        offsets: np.ndarray,
        stops: np.ndarray,
        out: np.ndarray,
        labels: np.ndarray,
        ids: np.ndarray | None,
        start: int,
        span_limit: int,
        classes: bool,
    ) -> tuple[int, Any]:
        """Samples ``start..`` of a batch read from ``fd`` (each record's
        bytes ``offsets[j]:stops[j]``, int64) into ``out`` (the batch's
        array), their labels into ``labels`` (float32; with ``classes``,
        class indices only) and ids into ``ids`` (uint64, or None), the same draws as calling this
        writer on each. ``(next, outcome)``: the first sample not done, and
        what :meth:`finish` needs to complete it (``_jpeg.crop_batch``,
        im2rec/imaging/_batch.h)."""
        bits = self._rng.bit_generator
        run = functools.partial(
            _jpeg.crop_batch, self._plan, fd, offsets, stops, out, bits, pixel_limit(), labels,
            ids, start, span_limit, classes,
        )  # fmt: skip
        if not _jpeg._helper():  # (IM2REC_HELPER=0, not Linux): one by one
            return run(False)  # type: ignore[no-any-return]
        # Drawn together, decoded by this thread and the idle-time helper;
        # where a sample stops that run with others drawn after it, the
        # generator is put back and the samples are taken one by one.
        saved = bits.state
        got: tuple[int, Any] = run(True)
        if got[1] is Ellipsis:
            bits.state = saved
            got = run(False)
        return got

    def finish(self, outcome: Any, payload: bytes | memoryview, out: np.ndarray) -> None:
        """The sample :meth:`records` stopped at, as this writer would have
        written it: ``None`` (nothing drawn) from the start; a message (the
        decoder failed after the draws) raised as :func:`crop` raises it;
        ``(flip, box)`` (drawn, left to Pillow) finished with those draws."""
        if outcome is None:
            self(payload, out)
        elif isinstance(outcome, str):
            raise codec_error(outcome) from ValueError(outcome)
        else:
            self._rest(outcome, payload, out, self._rng)


def write(
    payload: bytes | memoryview,
    color: int,
    plan: Plan,
    resample: Callable[[], Image.Resampling],
    out: np.ndarray,
    k: list[float],
    mk: list[float],
    flip: bool,
) -> bool:
    """``out`` (C, H, W float32) = decoded pixels * ``k`` - ``mk`` per
    channel (``uint8``: the pixels), mirrored when ``flip``; False, with
    ``plan`` not called, where the region decoder does not apply (the caller
    takes the general path)."""
    if payload[:3] != b"\xff\xd8\xff":
        return False
    got = jpeg.window(payload, color, plan, resample, rgbx=True)
    if got is None:
        return False
    step = 1 if got.mode == "L" else 4
    width, height = got.size
    if got.cut is not None:  # the crop is cut from the decoder's rows as they are
        pixels, row, left = got.pixels, got.width * step, got.cut
    elif got.method in _OURS and _resample(got, out, k, mk, flip):
        return True  # resampled and written in one pass
    else:
        pixels, row, left = _pixels(got.finish(got.image())), width * step, 0
    if out.dtype == np.uint8:  # the pixels as they are (normalised later, on the device)
        _tensor.split(out, pixels, row, step, left, 0, width, height, out.shape[0], flip)
    else:
        _tensor.normalise(out, pixels, row, step, left, 0, width, height, out.shape[0], k, mk, flip)
    return True


def _resample(
    got: jpeg.Window, out: np.ndarray, k: list[float], mk: list[float], flip: bool
) -> bool:
    """``got`` resampled to ``out`` by :mod:`~im2rec.imaging._tensor` (Pillow-SIMD's
    arithmetic, its bytes; no image objects, each output row normalised while
    it is in cache); False where its filter table cannot be made (Pillow then)."""
    step = 1 if got.mode == "L" else 4
    box = (got.box[0] - got.x, got.box[1] - got.y, got.box[2] - got.x, got.box[3] - got.y)
    scaled = out.dtype != np.uint8
    return bool(
        _tensor.resample(
            out, got.pixels, got.width * step, step, got.width, got.height, box, int(got.method),
            out.shape[0], got.size[0], got.size[1], k if scaled else None,
            mk if scaled else None, flip,
        )
    )  # fmt: skip


def _pixels(im: Image.Image) -> Any:
    """``im``'s pixels for :mod:`~im2rec.imaging._tensor`: read in place
    through Pillow's Arrow export (Pillow 11.2 and later, an image in one
    block), or copied out (``tobytes``, which copies them twice)."""
    try:
        return im.__arrow_c_array__()
    except (AttributeError, ValueError):
        return im.tobytes()
