from collections.abc import Sequence

def simd() -> tuple[str, str, str]: ...
def normalise(
    out: object,
    pixels: bytes | memoryview,
    row_bytes: int,
    pixel_bytes: int,
    left: int,
    top: int,
    width: int,
    height: int,
    channels: int,
    k: Sequence[float],
    mk: Sequence[float],
    flip: bool,
    /,
) -> None: ...
def _plan(
    in_size: int, in0: float, in1: float, out_size: int, filter: int, fast: int, /
) -> tuple[list[int], list[int], bytes, int] | None: ...
def _planar(
    in_size: int, in0: float, in1: float, out_size: int, filter: int, avx2: bool = ..., /
) -> tuple[int, int] | None: ...
