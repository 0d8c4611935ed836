"""The compiled parts, all optional: JPEG region decoding against
libjpeg-turbo (im2rec/imaging/_jpeg.c, training crops rendered as planned
in _crop.h), pixels to normalised tensors (im2rec/imaging/_tensor.c,
resampling in _resample.h, vector kernels in imaging/simd/) and the
magic-word scan (im2rec/recordio/_words.c), and the listing's text
(im2rec/listing/_text.c: large JSON annotation files into columns,
float32 labels into .lst text). Each is kept for a gain on a
whole job (bench/bench_native.py, docs/performance.md).
Without a C compiler or the libjpeg headers the build goes on without them
and im2rec decodes with Pillow and normalises and scans with numpy
(``rec --version`` says which). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

# Strict ISO C: no fused multiply-adds, so the float32 arithmetic is the
# very one numpy does (tested for identical results).
FLAGS = ["-O2", "-std=c99", "-ffp-contract=off", "-Wall", "-Wextra", "-Wno-unused-parameter"]
# Overflow-checked arithmetic shared by every extension (docs/security.md).
DEPENDS = ["im2rec/checked.h"]
# _tensor.c's own headers: the resampler, its vector kernels (simd/: AVX2 and
# AVX-512, RGBX and planar, weight tables, and the level they run at), the
# plane writers, the tests' probes, the Arrow reader, and the C table it
# gives _jpeg.c (whose training crops are rendered in _crop.h)
HEADERS = (
    "_resample.h", "simd/level.h", "simd/resample_avx512.h", "simd/resample_avx2.h",
    "simd/weights_x86.h", "simd/planar_avx512.h", "simd/planar_avx2.h", "_planes.h",
    "_probes.h", "_arrow.h", "_tensor_api.h",
)

setup(
    ext_modules=[
        Extension(
            "im2rec.imaging._jpeg",
            ["im2rec/imaging/_jpeg.c"],
            libraries=["jpeg"],
            extra_compile_args=FLAGS,
            depends=[*DEPENDS, "im2rec/imaging/_crop.h", "im2rec/imaging/_batch.h",
                     "im2rec/imaging/_helper.h", "im2rec/imaging/_tensor_api.h"],
            optional=True,
        ),
        Extension(
            "im2rec.imaging._tensor",
            ["im2rec/imaging/_tensor.c"],
            extra_compile_args=[*FLAGS, "-O3"],
            depends=[*DEPENDS, *(f"im2rec/imaging/{h}" for h in HEADERS)],
            optional=True,
        ),
        Extension(
            "im2rec.listing._text",
            ["im2rec/listing/_text.c"],
            extra_compile_args=[*FLAGS, "-O3", "-pthread"],
            extra_link_args=["-pthread"],
            depends=[*DEPENDS, "im2rec/listing/_json.h", "im2rec/listing/_floats.h"],
            optional=True,
        ),
        Extension(
            "im2rec.recordio._words",
            ["im2rec/recordio/_words.c"],
            extra_compile_args=[*FLAGS, "-O3"],
            depends=DEPENDS,
            optional=True,
        ),
    ]
)
