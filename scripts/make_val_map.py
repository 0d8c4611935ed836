"""Derive im2rec's bundled ImageNet val map from GluonCV's imagenet_val_maps.pklz.

    python scripts/make_val_map.py ../shared/data/imagenet_val_maps.pklz im2rec/imagenet/val_map.bin

The output (``im2rec.imagenet.valmap.BUNDLED``) is zlib-compressed:
``im2rec-val-map 1\\n``, the 1,000 WNIDs in sorted order one per line, an
empty line, then one little-endian uint16 per val image (image i+1's WNID as
an index into that list). tests/imagenet/test_valmap.py checks it against the
pklz and against the SHA-1 of the canonical ``fname<TAB>wnid`` TSV.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np

from im2rec.imagenet.valmap import MAGIC, load_val_map


def main(src: str, dst: str) -> None:
    vm = load_val_map(Path(src))
    index = {w: i for i, w in enumerate(vm.wnids)}
    labels = np.array([index[w] for _, w in vm.pairs], "<u2")
    blob = MAGIC + "".join(f"{w}\n" for w in vm.wnids).encode() + b"\n" + labels.tobytes()
    Path(dst).write_bytes(zlib.compress(blob, 9))


if __name__ == "__main__":
    main(*sys.argv[1:3])
