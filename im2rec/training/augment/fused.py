"""The usual training recipe in one pass: decode the JPEG region a crop
keeps, resample it once, and write normalised float32 planes straight from
the decoder's pixels.

This is :meth:`Augmenter.write <im2rec.training.augment.Augmenter.write>` for float32
(or uint8) output without photometric changes, a mean image or random contrast and
illumination, on JPEG data the region decoder takes; the detection draw
(:mod:`im2rec.training.detdraw`) takes the same :func:`window` and :func:`render`
for a sample its window fills. The general path
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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from ... import native
from ...errors import ImageCodecError
from ...imaging import jpeg
from ...imaging.codec import Plan, pillow_simd, pixel_limit
from ...recordio import spans
from . import geometry

# (None: built without a compiler, or switched off: numpy normalises)
_tensor: Any = native.load("tensor")
# (None: no region decoder; the crop's batch is in it, using _tensor's C table)
_jpeg: Any = native.load("jpeg") if _tensor is not None else None

__all__ = [
    "CropPlan",
    "Writer",
    "available",
    "codec_error",
    "crop",
    "crop_plan",
    "render",
    "window",
    "write",
]


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


@dataclass(frozen=True)
class CropPlan:
    """MXNet's random-resized crop as the C decoder makes it: the decisions
    (``rule``, ``resize``, ``mirror``: random, always) made here in Python by
    :mod:`~im2rec.training.augment.geometry` and
    :func:`~im2rec.imaging.jpeg.regions`, the pixels by ``capsule`` (the
    output's shape, ``method`` and normaliser, checked in C)."""

    capsule: Any
    rule: geometry.CropRule
    resize: int
    mirror: tuple[bool, bool]
    method: Image.Resampling

    @property
    def draws(self) -> int:
        """The uniforms a sample takes, as the Python path draws them: the
        mirror's coin (with a random mirror that is not always on), then
        the crop's block (:data:`geometry.RRC_DRAWS`)."""
        return int(self.mirror[0] and not self.mirror[1]) + geometry.RRC_DRAWS

    def decide(self, sizes: np.ndarray, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For images of ``sizes`` (``(n, 2)`` width, height) and their
        ``draws`` (``(n, draws)``): the C decoder's rows (float64, one per
        sample: mirror, scale, plain cut, region, box at the scale;
        im2rec/imaging/_crop.h) and the boxes in stored pixels."""
        rows = np.empty((len(sizes), _REGION_COLUMNS), np.float64)
        coin = int(self.mirror[0] and not self.mirror[1])
        rows[:, 0] = True if self.mirror[1] else (draws[:, 0] < 0.5) if coin else False
        width, height = sizes[:, 0], sizes[:, 1]
        boxes, _ = geometry.planned_boxes(width, height, self.resize, self.rule, draws[:, coin:])
        got = jpeg.regions(width, height, boxes, (self.rule.out_w, self.rule.out_h), self.method)
        rows[:, 1], rows[:, 2], rows[:, 3:7], rows[:, 7:] = (
            got.scale,
            got.exact,
            got.bounds,
            got.fbox,
        )
        return rows, boxes


#: the most a writer keeps to read its batches' records into (a larger batch
#: reads into memory of its own)
_BUFFER_LIMIT = 64 << 20

#: a region row's columns (_crop.h's Region: mirror, scale, cut, 4 bounds, 4 box)
_REGION_COLUMNS = 11


def crop_plan(
    channels: int,
    rule: geometry.CropRule,
    resize: int,
    mirror: tuple[bool, bool],
    method: Image.Resampling,
    coef: tuple[list[float], list[float]] | None,
) -> CropPlan | None:
    """The C decoder's plan for a random-resized crop by ``rule`` (``mirror``:
    random, always; ``coef``: the normaliser's ``k`` and ``mk``, None for
    uint8), or None where it does not take them: not built, or a filter it
    does not resample as Pillow (:data:`_OURS`)."""
    if (
        _jpeg is None
        or not hasattr(_jpeg, "render")
        or method not in _OURS
        or channels not in (1, 3)
    ):
        return None
    k, mk = coef if coef is not None else (None, None)
    capsule = _jpeg.crop_plan(channels, rule.out_w, rule.out_h, int(method), k, mk)
    return CropPlan(capsule, rule, resize, mirror, method)


def crop(
    plan: CropPlan | None, payload: bytes | memoryview, out: np.ndarray, rng: np.random.Generator
) -> bool | tuple[bool, tuple[float, float, float, float]] | None:
    """Augmenter.write's one-pass path through the C decoder: the mirror and
    the random-resized crop drawn from ``rng`` (the Python path's draws),
    the JPEG region decoded and resampled into ``out``. True when done;
    None, with nothing drawn, where the Python path is to run instead (not a
    JPEG the region decoder takes, over the pixel limit); ``(flip, box)``
    when the draws are made but the resampler leaves the sample to Pillow
    (the caller finishes it with them)."""
    if plan is None or not jpeg.enabled():
        return None
    limit, starts, lengths = pixel_limit(), np.zeros(1, np.int64), np.array([len(payload)])
    sizes = np.empty((1, 2), np.int64)
    if _jpeg.sizes(payload, starts, lengths, limit, sizes) == 0:
        return None
    rows, boxes = plan.decide(sizes, rng.random((1, plan.draws)))
    done, outcome = _jpeg.render(plan.capsule, payload, starts, lengths, rows, out, limit)
    if done:
        return True
    if outcome is False:
        return _drawn(rows, boxes, 0)
    raise codec_error(outcome) from ValueError(outcome)


def _drawn(rows: np.ndarray, boxes: np.ndarray, j: int) -> tuple[bool, geometry.Box]:
    """Sample ``j``'s draws as :meth:`Writer.finish` takes them."""
    x0, y0, x1, y1 = (float(v) for v in boxes[j])
    return bool(rows[j, 0]), (x0, y0, x1, y1)


def codec_error(why: str) -> ImageCodecError:
    """What :func:`crop` raises when the decoder fails on a sample."""
    return ImageCodecError(f"cannot decode image: {why}")


#: what the rest of Augmenter.write does after :func:`crop`: (done, payload, out, rng)
Rest = Callable[[Any, "bytes | memoryview", np.ndarray, np.random.Generator], None]


class Writer:
    """What :meth:`Augmenter.writer <im2rec.training.augment.Augmenter.writer>`
    returns: ``write(payload, out)`` is ``Augmenter.write`` with one
    generator; for a batch read straight from the ``.rec``, :meth:`records`
    runs the C decoder over many samples and :meth:`finish` completes one it
    stopped at."""

    __slots__ = ("_buffer", "_plan", "_rest", "_rng")

    def __init__(self, plan: CropPlan | None, rest: Rest, rng: np.random.Generator) -> None:
        self._plan, self._rest, self._rng = plan, rest, rng
        self._buffer = np.empty(0, np.uint8)  # the records of a batch, grown to the largest

    def __call__(self, payload: bytes | memoryview, out: np.ndarray) -> None:
        done = crop(self._plan, payload, out, self._rng)
        if done is not True:
            self._rest(done, payload, out, self._rng)

    @property
    def batched(self) -> bool:
        """Whether :meth:`records` can run (the C decoder takes the crop)."""
        return self._plan is not None and jpeg.enabled()

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
        class indices only) and ids into ``ids`` (uint64, or None), the same
        draws as calling this writer on each. ``(next, outcome)``: the first
        sample not done, and what :meth:`finish` needs to complete it: None
        (nothing drawn for it: not one whole single-label record, or not a
        JPEG the decoder takes), ``(flip, box)`` (drawn, left to Pillow) or
        the decoder's message (drawn, and it failed)."""
        plan = self._plan
        assert plan is not None, "records() needs the C decoder (see batched)"
        need = int(np.sum(stops[start:] - offsets[start:], dtype=np.int64))
        if 0 < need <= _BUFFER_LIMIT and len(self._buffer) < need:
            self._buffer = np.empty(need, np.uint8)
        got = spans.read_singles(
            fd, offsets[start:], stops[start:], span_limit, classes, self._buffer
        )
        limit = pixel_limit()
        sizes = np.empty((got.taken, 2), np.int64)
        k = _jpeg.sizes(got.data, got.starts, got.lengths, limit, sizes) if got.taken else 0
        if k == 0:
            return start, None
        rng = self._rng
        saved = rng.bit_generator.state
        rows, boxes = plan.decide(sizes[:k], rng.random((k, plan.draws)))
        done, outcome = _jpeg.render(
            plan.capsule, got.data, got.starts[:k], got.lengths[:k], rows, out[start : start + k],
            limit,
        )  # fmt: skip
        labels[start : start + done] = got.labels[:done]
        if ids is not None:
            ids[start : start + done] = got.ids[:done]
        if done < k:  # the generator as the sample-at-a-time path leaves it there
            rng.bit_generator.state = saved
            rng.random((done + 1, plan.draws))
            if outcome is False:
                outcome = _drawn(rows, boxes, done)
        return start + done, outcome

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
    out: np.ndarray,
    k: list[float],
    mk: list[float],
    flip: bool,
) -> bool:
    """``out`` (C, H, W float32) = decoded pixels * ``k`` - ``mk`` per
    channel (``uint8``: the pixels), mirrored when ``flip``; False, with
    ``plan`` not called, where the region decoder does not apply (the caller
    takes the general path)."""
    decided = window(payload, color, plan)
    if decided is None:
        return False
    got = decided[1]
    assert got is not None  # (the Augmenter's crops always show the image)
    render(got, out, k, mk, flip)
    return True


def window(
    payload: bytes | memoryview, color: int, plan: Plan
) -> tuple[Any, jpeg.Window | None] | None:
    """The plan's crop and the JPEG window it needs, decoded as
    :func:`render` takes it (four-byte pixels); None, with ``plan`` not
    called, where the region decoder does not apply."""
    if _tensor is None or payload[:3] != b"\xff\xd8\xff":
        return None
    return jpeg.window(payload, color, plan, rgbx=True)


def render(got: jpeg.Window, out: np.ndarray, k: list[float], mk: list[float], flip: bool) -> None:
    """:func:`write`'s output from a decoded window: resampled to ``out``'s
    size, normalised (or, ``uint8``, split into planes) and mirrored."""
    step = 1 if got.mode == "L" else 4
    width, height = got.size
    if got.cut is not None:  # the crop is cut from the decoder's rows as they are
        pixels, row, left = got.pixels, got.width * step, got.cut
    elif got.method in _OURS and _resample(got, out, k, mk, flip):
        return  # resampled and written in one pass
    else:
        pixels, row, left = _pixels(got.finish(got.image())), width * step, 0
    if out.dtype == np.uint8:  # the pixels as they are (normalised later, on the device)
        _tensor.split(out, pixels, row, step, left, 0, width, height, out.shape[0], flip)
    else:
        _tensor.normalise(out, pixels, row, step, left, 0, width, height, out.shape[0], k, mk, flip)


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
