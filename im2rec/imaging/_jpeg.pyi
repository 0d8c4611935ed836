LIBJPEG_TURBO_VERSION: int

def header(data: bytes | memoryview, /) -> tuple[int, int, int, int, int]: ...
def decode(
    data: bytes | memoryview,
    denom: int,
    left: int,
    top: int,
    right: int,
    bottom: int,
    gray: bool,
    max_pixels: int,
    rgbx: bool = False,
    /,
) -> tuple[bytes, int, int, int, int] | None: ...
