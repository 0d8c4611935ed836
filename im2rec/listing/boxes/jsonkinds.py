"""What :mod:`.jsoncolumns` reads a value as: its kind (one byte a row),
how a section's value was, and each field type's numbers."""

from __future__ import annotations

import numpy as np

__all__ = [
    "ABSENT", "ARRAY", "BIGINT", "DTYPES", "FALSE", "FALSY", "FLOAT", "INT", "LIST", "MISSING",
    "NULL", "OBJECT", "QUAD", "STRING", "TRUE", "TRUTHY", "Spec",
]  # fmt: skip

MISSING, NULL, FALSE, TRUE, INT, BIGINT, FLOAT, STRING, ARRAY, OBJECT, QUAD = range(11)
#: how a section's value was: absent, a list, another falsy value, another
ABSENT, LIST, FALSY, TRUTHY = range(4)

#: (section, [(field, type), ...]): types "i", "f", "b", "q", "s"
Spec = list[tuple[str, list[tuple[str, str]]]]

#: each field type's numbers
DTYPES = {"i": np.int64, "f": np.float64, "b": np.uint8, "q": np.float64}
