"""MXNet's photometric augmenters (``image_aug_default.cc``), on the
cropped ``H x W x C`` RGB(A) pixels, in its order: brightness, contrast and
saturation (each scaled by ``1 + U(-v, v)``, the three in a random order),
then the HSL jitter, then PCA ("lighting") noise.

MXNet works on 8-bit images, rounding and saturating after every step; the
levels here are float32 planes (the output buffer itself when the output is
float32), rounded and saturated at the same points, so they take the values
an 8-bit pipeline gives. Contrast pivots on the mean of the exact grey where
MXNet averages the rounded one: within half a level. Two of MXNet's quirks are
kept because they shape its output: its grey level is OpenCV's RGB->grey
applied to BGR data (weights 0.114 R, 0.587 G, 0.299 B), and PCA noise is
added with truncation toward zero. Alpha is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Photometric"]

#: MXNet's eigenvalue-scaled eigenvectors of ImageNet's RGB covariance
#: (rows R, G, B), as its augmenter stores them.
EIGVEC = np.array(
    [
        [55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
        [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
        [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203],
    ],
    np.float32,
)
#: The grey weights MXNet ends up with (see the module doc), R, G, B.
_GREY = np.array([0.114, 0.587, 0.299], np.float32)


def _settle(x: np.ndarray) -> None:
    """What storing into 8 bits does: round (half to even), saturate."""
    np.rint(x, out=x)
    np.clip(x, 0, 255, out=x)


def _grey(planes: np.ndarray) -> np.ndarray:
    """MXNet's grey level of ``(3, H, W)`` planes (see the module doc)."""
    w = _GREY
    grey: np.ndarray = planes[0] * w[0]
    grey += planes[1] * w[1]
    grey += planes[2] * w[2]
    return grey


@dataclass(frozen=True)
class Photometric:
    """The photometric options; :meth:`apply` runs the enabled ones."""

    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    pca_noise: float = 0.0

    def active(self) -> bool:
        return bool(
            self.brightness > 0 or self.contrast > 0 or self.saturation > 0
            or self.random_h or self.random_s or self.random_l or self.pca_noise > 0
        )  # fmt: skip

    def needs_colour(self) -> bool:
        return bool(self.saturation > 0 or self.random_h or self.random_s or self.random_l
                    or self.pca_noise > 0)  # fmt: skip

    def apply(self, planes: np.ndarray, rng: np.random.Generator) -> None:
        """The enabled augmenters on float32 ``(C, H, W)`` levels (C 1, 3 or
        4; alpha untouched), in place."""
        rgb = planes[:3]
        if self.brightness > 0 or self.contrast > 0 or self.saturation > 0:
            self._jitter(rgb, rng)
        if self.random_h or self.random_s or self.random_l:
            rgb[...] = self._hsl(rgb, rng)
        if self.pca_noise > 0:
            alpha = rng.normal(0.0, self.pca_noise, 3).astype(np.float32)
            rgb += (EIGVEC @ alpha)[:, None, None]
            np.trunc(rgb, out=rgb)  # MXNet adds to an int: truncation
            np.clip(rgb, 0, 255, out=rgb)

    def _jitter(self, rgb: np.ndarray, rng: np.random.Generator) -> None:
        factors = [1.0 + rng.uniform(-v, v) if v > 0 else 1.0
                   for v in (self.brightness, self.contrast, self.saturation)]  # fmt: skip
        colour = len(rgb) == 3
        for op in rng.permutation(3):
            a = np.float32(factors[op])
            if a == 1:
                continue
            if op == 0:  # brightness: every level times a
                rgb *= a
            elif op == 1:  # contrast: about the mean grey level
                mean = float(_GREY @ rgb.mean(axis=(1, 2))) if colour else float(rgb.mean())
                rgb *= a
                rgb += np.float32((1 - a) * mean)
            elif colour:  # saturation: toward each pixel's (rounded) grey
                grey = np.rint(_grey(rgb))
                grey *= 1 - a
                rgb *= a
                rgb += grey
            else:
                continue
            _settle(rgb)

    def _hsl(self, rgb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # An approximate Gaussian in [0, 1] (the mean of 1 and 4 uniform draws,
        # as MXNet writes it), scaled to [-v, v] and truncated to an integer.
        shifts = []
        for v in (self.random_h, self.random_s, self.random_l):
            r = (rng.random() + 4 * rng.random()) / 5
            shifts.append(int(r * v * 2 - v))
        h, s, light = to_hls(rgb.transpose(1, 2, 0))
        h = np.clip(h + shifts[0], 0, 180)
        s = np.clip(s + shifts[1], 0, 255)
        light = np.clip(light + shifts[2], 0, 255)
        shifted: np.ndarray = from_hls(h, light, s).transpose(2, 0, 1)
        return shifted


def to_hls(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OpenCV's 8-bit RGB -> HLS: H in [0, 180), L and S in [0, 255], rounded."""
    x = rgb / np.float32(255)
    r, g, b = x[:, :, 0], x[:, :, 1], x[:, :, 2]
    vmax, vmin = x.max(axis=2), x.min(axis=2)
    diff = vmax - vmin
    light = (vmax + vmin) / 2
    chroma = diff > np.float32(1e-6)
    total = vmax + vmin
    denom = np.where(light < 0.5, total, 2 - total)
    s = np.where(chroma, diff / np.where(denom > 0, denom, 1), 0)
    safe = np.where(chroma, diff, 1)
    other = np.where(vmax == g, (b - r) * 60 / safe + 120, (r - g) * 60 / safe + 240)
    h = np.where(vmax == r, (g - b) * 60 / safe, other)
    h = np.where(chroma, h, 0)
    h = np.where(h < 0, h + 360, h)
    return np.rint(h / 2), np.rint(s * 255), np.rint(light * 255)


def from_hls(h: np.ndarray, light: np.ndarray, s: np.ndarray) -> np.ndarray:
    """OpenCV's 8-bit HLS -> RGB (``h`` in [0, 180]), rounded to 0-255."""
    hue = (h * 2) % 360 / 60  # sector 0-6
    lf, sf = light / 255, s / 255
    p2 = np.where(lf <= 0.5, lf * (1 + sf), lf + sf - lf * sf)
    p1 = 2 * lf - p2

    def channel(offset: float) -> np.ndarray:
        t = (hue + offset) % 6
        falling = np.where(t < 4, p1 + (p2 - p1) * (4 - t), p1)
        return np.where(t < 1, p1 + (p2 - p1) * t, np.where(t < 3, p2, falling))

    out = np.stack([channel(2), channel(0), channel(4)], axis=2)
    out = np.where((sf == 0)[:, :, None], lf[:, :, None], out)
    result: np.ndarray = np.clip(np.rint(out * 255), 0, 255).astype(np.float32)
    return result
