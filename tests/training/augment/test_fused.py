"""The one-pass training path (im2rec.training.augment.fused): float32 samples made
straight from the region decoder's pixels are the general path's, value
for value, for every crop recipe and kind of JPEG; what it does not take
goes the general way; the C normaliser checks every size it is given."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from im2rec import native
from im2rec.training.augment import Augmenter, fused

from ...conftest import photo
from ...imaging.test_regions import KINDS

tensor: Any = pytest.importorskip("im2rec.imaging._tensor", reason="built without the extension")
#: beside Pillow-SIMD the one-pass path's resampling gives its very bytes
PILLOW_SIMD = Image.Resampling.BICUBIC in fused._OURS

RECIPES: dict[str, dict[str, Any]] = {
    "random-resized crop": dict(random_resized_crop=True, min_random_area=0.08,
                                max_aspect_ratio=4 / 3, min_aspect_ratio=3 / 4),
    "random-resized crop, random filters": dict(random_resized_crop=True, min_random_area=0.08,
                                                max_aspect_ratio=4 / 3, min_aspect_ratio=3 / 4,
                                                inter_method=10),
    "random crop": dict(rand_crop=True),
    "resize and random crop": dict(resize=150, rand_crop=True, inter_method=2),
    "centre crop of a resize": dict(resize=120),
    "random crop size, nearest": dict(rand_crop=True, min_crop_size=20, max_crop_size=30,
                                      inter_method=0),
    "centre crop": dict(),
}  # fmt: skip
NORMALISE = dict(mean=(123.68, 116.28, 103.53), std=(58.395, 57.12, 57.375), rand_mirror=True)


def samples(aug: Augmenter, payloads: list[bytes], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((len(payloads), *aug.data_shape), aug.dtype)
    for i, payload in enumerate(payloads):
        aug.write(payload, out[i], rng)
    return out


def general(monkeypatch: pytest.MonkeyPatch, **options: Any) -> Augmenter:
    """The same Augmenter as without the C normaliser (built without it)."""
    with monkeypatch.context() as m:
        m.setattr(fused, "_tensor", None)
        return Augmenter(**options)


@pytest.mark.skipif(native.switched_off(), reason="IM2REC_NO_NATIVE: there is no one-pass path")
@pytest.mark.parametrize("recipe", sorted(RECIPES))
@pytest.mark.parametrize("channels", [3, 1])
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_one_pass_samples_are_the_general_paths(
    recipe: str, channels: int, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = dict(data_shape=(channels, 64, 72), dtype=dtype, **RECIPES[recipe], **NORMALISE)
    fast = Augmenter(**options)
    assert fast._one_pass, "the test must run the one-pass path"
    slow = general(monkeypatch, **options)
    assert not slow._one_pass
    payloads = [KINDS[kind] for kind in sorted(KINDS) if kind != "tiny"] * 3
    for seed in range(3):
        got, want = samples(fast, payloads, seed), samples(slow, payloads, seed)
        if PILLOW_SIMD:  # the one-pass path resamples with its arithmetic: the same bytes
            np.testing.assert_array_equal(got, want)
        else:  # plain Pillow rounds its 22-bit weights otherwise: one level at most
            level = 1.0 if dtype == "uint8" else max(fast._coef[0])
            assert np.abs(got.astype(np.float64) - want).max() <= level * 1.0001
            assert np.mean(got != want) < 0.1


def test_a_plain_cut_of_stored_pixels_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    # no resize, crop = output size: no resampling at all, on either path
    options = dict(data_shape=(3, 100, 100), rand_crop=True, mirror=True, scale=1 / 255)
    payload = KINDS["4:4:4"]
    got = samples(Augmenter(**options), [payload] * 8, 5)
    want = samples(general(monkeypatch, **options), [payload] * 8, 5)
    np.testing.assert_array_equal(got, want)
    # and each sample is a mirrored window of the decoded image, scaled
    full = np.asarray(Image.open(io.BytesIO(payload)).convert("RGB"), np.float32)
    planes = full.transpose(2, 0, 1)[:, :, ::-1] * np.float32(1 / 255)  # k = scale / std
    for sample in got:  # some window of the image is this sample
        ys, xs = np.nonzero(planes[0, :-99, :-99] == sample[0, 0, 0])
        assert any(
            np.array_equal(planes[:, y : y + 100, x : x + 100], sample)
            for y, x in zip(ys, xs, strict=True)
        )


@pytest.mark.parametrize("fmt", ["PNG", "JPEG-CMYK", "JPEG-rotated"])
def test_what_the_region_decoder_does_not_take_goes_the_general_way(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    im = photo(90, 70, seed=9)
    buf = io.BytesIO()
    if fmt == "JPEG-CMYK":
        im.convert("CMYK").save(buf, "JPEG")
    elif fmt == "JPEG-rotated":
        exif = Image.Exif()
        exif[0x0112] = 6  # turned a quarter: Pillow turns it back
        im.save(buf, "JPEG", exif=exif.tobytes())
    else:
        im.save(buf, fmt)
    options = dict(data_shape=(3, 48, 48), random_resized_crop=True, **NORMALISE)
    payloads = [buf.getvalue()] * 4
    np.testing.assert_array_equal(
        samples(Augmenter(**options), payloads, 1),
        samples(general(monkeypatch, **options), payloads, 1),
    )


@pytest.mark.parametrize(
    "options",
    [dict(brightness=0.4), dict(max_random_contrast=0.2), dict(max_random_illumination=3),
     dict(dtype="int8"), dict(max_rotate_angle=10), dict(pad=4)],
)  # fmt: skip
def test_options_beyond_the_recipe_keep_the_general_path(options: dict[str, Any]) -> None:
    assert not Augmenter(data_shape=(3, 32, 32), rand_crop=True, **options)._one_pass


def test_switched_off_with_the_region_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IM2REC_NATIVE_JPEG", "0")
    assert not Augmenter(data_shape=(3, 32, 32), rand_crop=True)._one_pass


def _normalise(**changes: Any) -> None:
    args: dict[str, Any] = dict(
        out=np.zeros((3, 4, 5), np.float32), pixels=bytes(6 * 4 * 4), row_bytes=24,
        pixel_bytes=4, left=1, top=0, width=5, height=4, channels=3, k=[1.0] * 3,
        mk=[0.0] * 3, flip=False,
    )  # fmt: skip
    args.update(changes)
    tensor.normalise(*args.values())


def test_the_normaliser_checks_every_size() -> None:
    _normalise()  # the geometry that fits exactly
    for bad in (
        dict(pixels=bytes(6 * 4 * 4 - 1)), dict(out=np.zeros((3, 4, 4), np.float32)),
        dict(row_bytes=23), dict(pixel_bytes=2), dict(left=-1), dict(top=1), dict(width=0),
        dict(channels=1), dict(channels=2), dict(k=[1.0, 1.0]), dict(height=5),
        dict(out=np.zeros((3, 4, 5), np.float32)[:, :, ::-1]),
    ):  # fmt: skip
        with pytest.raises((ValueError, BufferError, TypeError)):
            _normalise(**bad)


@pytest.mark.parametrize("width", [1, 3, 4, 5, 7, 8, 9, 16, 223, 224])
@pytest.mark.parametrize(
    ("step", "channels"), [(4, 3), (3, 3), (1, 3), (1, 1)], ids=["rgbx", "rgb", "gray3", "gray"]
)
def test_the_normaliser_computes_numpys_values(width: int, step: int, channels: int) -> None:
    # every width around the four-pixel vector loop (its tail, mirrored or
    # not), and outputs aligned for streaming stores or not
    rng = np.random.default_rng(width)
    pixels = rng.integers(0, 256, (7, width + 3, step), np.uint8)
    k = (np.float32(1 / 255) / np.array([0.229, 0.224, 0.225], np.float32))[:channels]
    mk = (np.array([0.485, 0.456, 0.406], np.float32) * 255 * k)[:channels]
    for flip in (False, True):
        for shift in (0, 1, 4):  # floats past a 64-byte boundary (0: AVX-512's streams)
            size = channels * 5 * width
            block = np.empty(size + 32, np.float32)
            start = (-block.ctypes.data % 64) // 4 + shift
            out = block[start : start + size].reshape(channels, 5, width)
            tensor.normalise(out, pixels.tobytes(), (width + 3) * step, step, 2, 1, width, 5,
                             channels, k.tolist(), mk.tolist(), flip)  # fmt: skip
            window = pixels[1:6, 2 : 2 + width]
            planes = window[:, :, :3] if step > 1 else window[:, :, [0] * channels]
            planes = planes.transpose(2, 0, 1)
            want = planes[:, :, ::-1] * k[:, None, None] if flip else planes * k[:, None, None]
            np.testing.assert_array_equal(out, want - mk[:, None, None])


@pytest.mark.parametrize("width", [1, 3, 4, 5, 16, 17, 35, 224])  # (AVX-512: 16 a step)
@pytest.mark.parametrize(
    ("step", "channels"), [(4, 3), (3, 3), (1, 3), (1, 1)], ids=["rgbx", "rgb", "gray3", "gray"]
)
def test_split_gives_the_pixels_as_planes(width: int, step: int, channels: int) -> None:
    rng = np.random.default_rng(width)
    pixels = rng.integers(0, 256, (7, width + 3, step), np.uint8)
    for flip in (False, True):
        out = np.empty((channels, 5, width), np.uint8)
        tensor.split(out, pixels.tobytes(), (width + 3) * step, step, 2, 1, width, 5, channels,
                     flip)  # fmt: skip
        window = pixels[1:6, 2 : 2 + width]
        planes = (window[:, :, :3] if step > 1 else window[:, :, [0] * channels]).transpose(2, 0, 1)
        np.testing.assert_array_equal(out, planes[:, :, ::-1] if flip else planes)


def test_split_checks_every_size() -> None:
    def split(**changes: Any) -> None:
        args: dict[str, Any] = dict(
            out=np.zeros((3, 4, 5), np.uint8), pixels=bytes(6 * 4 * 4), row_bytes=24,
            pixel_bytes=4, left=1, top=0, width=5, height=4, channels=3, flip=True,
        )  # fmt: skip
        args.update(changes)
        tensor.split(*args.values())

    split()
    for bad in (
        dict(pixels=bytes(6 * 4 * 4 - 1)), dict(out=np.zeros((3, 4, 4), np.uint8)),
        dict(row_bytes=23), dict(pixel_bytes=2), dict(left=-1), dict(top=1), dict(width=0),
        dict(channels=2), dict(height=5), dict(out=np.zeros((3, 4, 5), np.uint8)[:, :, ::-1]),
        dict(left=2**62), dict(width=2**62, row_bytes=2**63 - 1),
    ):  # fmt: skip
        with pytest.raises((ValueError, BufferError, TypeError, OverflowError)):
            split(**bad)


@pytest.mark.parametrize("mode", ["RGBX", "RGB", "L"])
def test_pillows_arrow_export_is_read_in_place(mode: str) -> None:
    image = photo(37, 11, 5).convert(mode)
    if not hasattr(image, "__arrow_c_array__"):
        pytest.skip("Pillow before 11.2 has no Arrow export")
    step = 1 if mode == "L" else 4
    channels = 1 if mode == "L" else 3
    exported = fused._pixels(image)
    assert isinstance(exported, tuple)  # the capsules, not a copy
    raw = image.tobytes("raw", "RGBX" if step == 4 else "L")
    for flip in (False, True):
        via_arrow, via_bytes = (np.empty((channels, 11, 37), np.float32) for _ in range(2))
        args = (37 * step, step, 0, 0, 37, 11, channels, [0.5] * channels, [1.0] * channels, flip)
        tensor.normalise(via_arrow, exported, *args)
        tensor.normalise(via_bytes, raw, *args)
        np.testing.assert_array_equal(via_arrow, via_bytes)
    out = np.empty((channels, 11, 37), np.float32)
    with pytest.raises(ValueError, match="smaller"):  # its size is checked like any buffer's
        tensor.normalise(out, exported, 37 * step, step, 0, 1, 37, 11, channels, [1.0] * 3,
                         [0.0] * 3, False)  # fmt: skip
    with pytest.raises(ValueError):
        tensor.normalise(out, (exported[1], exported[0]), 37 * step, step, 0, 0, 37, 11,
                         channels, [1.0] * 3, [0.0] * 3, False)  # fmt: skip
    if mode != "L":
        image16 = Image.new("I;16", (37, 11))
        with pytest.raises(ValueError, match="8-bit"):
            tensor.normalise(out, image16.__arrow_c_array__(), 37 * 2, 1, 0, 0, 37, 11, 1,
                             [1.0], [0.0], False)  # fmt: skip
