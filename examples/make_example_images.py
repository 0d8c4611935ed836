"""Regenerate the bundled demo images in examples/example/ (deterministic).

    .venv/bin/python examples/make_example_images.py

Three classes of small synthetic "photos" (smooth colour fields with grain),
one of them a PNG and one grayscale, so the demo shows a mixed folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).parent / "example"
CLASSES = {"cats": (200, 120, 60), "dogs": (90, 110, 160), "birds": (70, 150, 80)}


def make(tint: tuple[int, int, int], seed: int, size: tuple[int, int]) -> Image.Image:
    rng = np.random.default_rng(seed)
    low = np.clip(rng.normal(tint, 40, (4, 5, 3)), 0, 255).astype(np.uint8)
    field = np.asarray(Image.fromarray(low).resize(size, Image.Resampling.BICUBIC), np.int16)
    grain = rng.integers(-5, 6, (size[1], size[0], 1), dtype=np.int16)
    return Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8))


def main() -> None:
    for c, (name, tint) in enumerate(CLASSES.items()):
        folder = HERE / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(5):
            im = make(tint, 10 * c + i, (160 + 16 * i, 120 + 8 * i))
            if name == "birds" and i == 4:
                im.convert("L").save(folder / f"{name}_{i}.jpg", quality=85)
            elif name == "dogs" and i == 4:
                im.save(folder / f"{name}_{i}.png")
            else:
                im.save(folder / f"{name}_{i}.jpg", quality=85)


if __name__ == "__main__":
    main()
