"""The optional C extensions, as one unit: one loader, one switch.

Each extension speeds up one thing that Python, numpy and Pillow also do;
im2rec works without any of them (installed where no compiler or no
libjpeg headers were found), and the whole test suite runs both ways.

* ``words`` (``im2rec.recordio._words``) finds the magic word in a payload,
  and walks and gathers a block of records for ``rec info`` and ``rec
  verify``; without it, ``bytes.find``, numpy and a walk in Python;
* ``jpeg`` (``im2rec.imaging._jpeg``, libjpeg-turbo) decodes only the JPEG
  region a crop keeps; without it, Pillow decodes the whole image;
* ``tensor`` (``im2rec.imaging._tensor``) crops, mirrors and normalises
  into the batch in one pass; without it, numpy;
* ``text`` (``im2rec.listing._text``) reads large JSON annotation files
  into columns and writes float32 labels as ``.lst`` text; without it,
  Python's ``json`` an item at a time and numpy's ``str``.

``IM2REC_SIMD=portable|avx2|avx512`` caps the vector kernels ``tensor``
may run (im2rec/imaging/simd/README.md; the default, avx512, is no cap),
read when ``tensor`` is loaded. ``IM2REC_NO_NATIVE=1`` turns all of them
off; it is read when an extension is first asked for, which is when the
module that uses it is imported, so set it before the process starts.
``IM2REC_NATIVE_JPEG=0`` turns off the JPEG region decoder alone (and the
one-pass path, which needs it), at any time. ``rec --version`` says which
are on.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NamedTuple

from .errors import ConfigError

__all__ = [
    "MODULES",
    "SIMD_LEVELS",
    "Extension",
    "extensions",
    "jpeg_regions_on",
    "jpeg_turbo_version",
    "load",
    "simd_cap",
    "simd_levels",
    "switched_off",
]

#: name -> the extension module
MODULES = {
    "words": "im2rec.recordio._words",
    "jpeg": "im2rec.imaging._jpeg",
    "tensor": "im2rec.imaging._tensor",
    "text": "im2rec.listing._text",
}

_loaded: dict[str, ModuleType | None] = {}
_state: dict[str, str] = {}


def switched_off() -> bool:
    """Whether ``IM2REC_NO_NATIVE`` turns the extensions off."""
    return os.environ.get("IM2REC_NO_NATIVE", "").strip() not in ("", "0")


def jpeg_regions_on() -> bool:
    """Whether ``IM2REC_NATIVE_JPEG`` leaves the JPEG region decoder on (read
    at every call: a test or a benchmark may compare both paths)."""
    return os.environ.get("IM2REC_NATIVE_JPEG", "1") != "0"


#: the words IM2REC_SIMD takes, lowest first
SIMD_LEVELS = ("portable", "avx2", "avx512")


def simd_cap() -> str | None:
    """``IM2REC_SIMD``'s level, or None when unset; a
    :class:`~im2rec.errors.ConfigError` for any other word."""
    word = os.environ.get("IM2REC_SIMD", "").strip()
    if not word:
        return None
    if word not in SIMD_LEVELS:
        raise ConfigError(
            f"IM2REC_SIMD={word!r} is not a level: use one of {', '.join(SIMD_LEVELS)} "
            "(or unset it for the best this CPU has)"
        )
    return word


def load(name: str) -> ModuleType | None:
    """The extension ``name`` (a key of :data:`MODULES`), or None when it is
    switched off or was not built."""
    if name == "tensor":
        simd_cap()  # (a bad word is the user's to fix, not a missing extension)
    if name not in _loaded:
        module = None
        if switched_off():
            state = "off"
        else:
            try:
                module = importlib.import_module(MODULES[name])
                state = "on"
            except ImportError:
                state = "not built"
        _loaded[name], _state[name] = module, state
    return _loaded[name]


class Extension(NamedTuple):
    name: str
    module: str
    state: str  # "on", "off" (IM2REC_NO_NATIVE), "not built"
    library: str | None  # the C library it was built against, with its version


def extensions() -> list[Extension]:
    """Every extension, whether it is in use, and its library."""
    found = []
    for name, module_name in MODULES.items():
        module = load(name)
        found.append(Extension(name, module_name, _state[name], _library(name, module)))
    return found


def jpeg_turbo_version(module: ModuleType | None) -> str | None:
    """The libjpeg-turbo the JPEG extension was built against (``2.1.5``)."""
    v = int(getattr(module, "LIBJPEG_TURBO_VERSION", 0) or 0)
    return f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}" if v else None


def simd_levels(module: ModuleType | None) -> tuple[str, str, str] | None:
    """The ``tensor`` extension's vector level in use, the CPU's best and
    the cap (``("avx2", "avx2", "avx512")``), or None without it."""
    return None if module is None else tuple(module.simd())


def _library(name: str, module: ModuleType | None) -> str | None:
    if name == "jpeg" and module is not None:
        version = jpeg_turbo_version(module)
        return f"libjpeg-turbo {version}" if version else "libjpeg"
    levels = simd_levels(module) if name == "tensor" else None
    if levels is not None:
        level, cpu, cap = levels
        return f"{level} kernels" + (f", IM2REC_SIMD={cap}; CPU {cpu}" if cap != "avx512" else "")
    return None
