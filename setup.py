"""The compiled parts, both optional: JPEG region decoding against
libjpeg-turbo (im2rec/decoding/_jpeg.c) and pixels to normalised tensors
(im2rec/decoding/_tensor.c). Without a C compiler or the libjpeg headers
the build goes on without them and im2rec decodes with Pillow and
normalises with numpy (``rec --version`` says which). Everything else is in
pyproject.toml."""

from setuptools import Extension, setup

# Strict ISO C: no fused multiply-adds, so the float32 arithmetic is the
# very one numpy does (tested for identical results).
FLAGS = ["-O2", "-std=c99", "-ffp-contract=off", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(
    ext_modules=[
        Extension(
            "im2rec.decoding._jpeg",
            ["im2rec/decoding/_jpeg.c"],
            libraries=["jpeg"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "im2rec.decoding._tensor",
            ["im2rec/decoding/_tensor.c"],
            extra_compile_args=[*FLAGS, "-O3"],
            optional=True,
        ),
    ]
)
