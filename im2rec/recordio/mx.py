"""Drop-in replacement for ``mxnet.recordio`` (docs/format.md, "The Python API").

``from im2rec import recordio`` gives ``MXRecordIO``, ``MXIndexedRecordIO``,
``IRHeader``, ``pack``, ``unpack``, ``pack_img`` and ``unpack_img`` with
MXNet's semantics, so code written for ``mx.recordio`` runs after changing
only its import. Deliberate differences (each fixes an MXNet bug; see the
README's "Differences from MXNet"):

* after ``read()`` returned ``None`` at the end, ``read_idx``/``seek`` work
  again (MXNet stayed at EOF until ``reset()``);
* pickling a reader leaves the original open; pickling a writer raises
  ``TypeError`` (MXNet closed the original and the copy truncated the files);
* a forked child may read (``read()`` raised in MXNet); writing from a child
  still raises;
* damaged input raises :class:`~im2rec.errors.RecordFormatError` naming the
  file and offset, including a file that ends inside a split record (MXNet
  returned ``None`` there);
* paths may be ``str``, ``bytes`` or ``os.PathLike``; ``write`` takes any
  bytes-like object; duplicate keys are refused when writing and reading;
* read-mode ``tell()`` is allowed on both classes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


from ..errors import ConfigError, ModeError
from .header import IRHeader, pack, unpack
from .index import RecordIndex, load_index
from .reader import RecordReader
from .views import KeyList, OffsetMap
from .writer import IndexedRecordWriter, RecordWriter

__all__ = [
    "IRHeader",
    "MXIndexedRecordIO",
    "MXRecordIO",
    "pack",
    "pack_img",
    "unpack",
    "unpack_img",
]


class MXRecordIO:
    """Sequential ``.rec`` reader (``flag='r'``) or writer (``flag='w'``)."""

    def __init__(self, uri: str | os.PathLike[str] | bytes, flag: str):
        self.uri = os.fsdecode(uri)
        if flag not in ("r", "w"):
            raise ValueError(f"Invalid flag {flag}")
        self.flag = flag
        self.writable = flag == "w"
        self.is_open = False
        self.open()

    # -- lifecycle -------------------------------------------------------
    def open(self) -> None:
        self._writer: RecordWriter | None = None
        self._reader: RecordReader | None = None
        if self.writable:
            from ..storage import is_url

            if is_url(self.uri):
                raise ConfigError(
                    f"{self.uri}: writing to a URL is not supported here; write a local file "
                    "and upload it (rec pack writes to stores itself)"
                )
            self._writer = self._make_writer()
        else:
            self._reader = RecordReader(self.uri)
            self._pos = 0
        self.is_open = True
        self.pid: int | None = os.getpid()

    def _make_writer(self) -> RecordWriter:
        return RecordWriter(self.uri, atomic=False)  # MXNet writes in place

    def close(self) -> None:
        if not self.is_open:
            return
        if self.writable:
            if self._writer is not None and self.pid == os.getpid():
                self._writer.close()
            self._writer = None
        else:
            if self._reader is not None:
                self._reader.close()
            self._reader = None
        self.is_open = False
        self.pid = None

    def reset(self) -> None:
        """Rewind a reader; a writer starts over with empty files (as MXNet)."""
        self.close()
        self.open()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass

    def __enter__(self) -> MXRecordIO:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pickling ----------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        if self.writable:
            raise TypeError(
                f"{self.uri}: a RecordIO writer cannot be pickled (MXNet's copy "
                "truncated the file); pass the path and open a writer in the other process"
            )
        state = self.__dict__.copy()
        state["_reader"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.is_open:
            self.is_open = False
            self.open()

    # -- data ----------------------------------------------------------------
    def _live_reader(self) -> RecordReader:
        if self.writable:
            raise ModeError(f"{self.uri}: opened for writing ('w'); open it with 'r' to read")
        if self._reader is None:
            raise ModeError(f"{self.uri}: the reader is closed; call open() or reset()")
        return self._reader

    def _live_writer(self) -> RecordWriter:
        if not self.writable:
            raise ModeError(f"{self.uri}: opened for reading ('r'); open it with 'w' to write")
        if self._writer is None:
            raise ModeError(f"{self.uri}: the writer is closed; call open() or reset()")
        return self._writer

    def write(self, buf: bytes | bytearray | memoryview) -> None:
        if isinstance(buf, str):
            raise TypeError("write() takes bytes, not str; encode the text first")
        self._live_writer().write(buf)

    def read(self) -> bytes | None:
        """The next record, or ``None`` at the end of the file."""
        data, self._pos = (
            self._reader if self._reader is not None else self._live_reader()
        ).read_next(self._pos)
        return data

    def tell(self) -> int:
        """Byte offset of the next record to be read or written."""
        if self.writable:
            return self._live_writer().tell()
        self._live_reader()
        return self._pos


class MXIndexedRecordIO(MXRecordIO):
    """``.rec`` with a ``.idx`` for random access by key."""

    def __init__(
        self,
        idx_path: str | os.PathLike[str] | bytes,
        uri: str | os.PathLike[str] | bytes,
        flag: str,
        key_type: Callable[[Any], Any] = int,
    ):
        self.idx_path = os.fsdecode(idx_path)
        self.key_type = key_type
        self._index: RecordIndex | None = None
        self._keys: MutableSequence[Any] | None = None
        self._idx: Mapping[Any, int] | None = None
        super().__init__(uri, flag)

    def open(self) -> None:
        super().open()
        if self.writable:
            self._idx, self._keys = {}, []
        elif self._index is None:
            # Like mxnet master, reset() keeps the index already in memory.
            self._index = load_index(self.idx_path, self.key_type)
            self._index.check_within(self._live_reader().size, self.uri)

    def _make_writer(self) -> RecordWriter:
        return IndexedRecordWriter(self.uri, self.idx_path, key_type=self.key_type, atomic=False)

    @property
    def idx(self) -> Mapping[Any, int]:
        """``{key: offset}``: when reading, a read-only mapping over the
        index (no dict of every key); when writing, the dict of what was
        written, as in MXNet."""
        if self._idx is None:
            self._idx = self._index.offset_map() if self._index is not None else {}
        return self._idx

    @idx.setter
    def idx(self, value: Mapping[Any, int]) -> None:
        self._idx = value

    @property
    def keys(self) -> MutableSequence[Any]:
        """Keys in ``.idx`` order, a list you may reorder, as with MXNet
        (when reading, a :class:`~im2rec.recordio.views.KeyList` over the
        index's array: no Python object a key until it is changed)."""
        if self._keys is None:
            keys = self._index.keys if self._index is not None else []
            self._keys = KeyList(keys if not isinstance(keys, Sequence) else list(keys))
        return self._keys

    @keys.setter
    def keys(self, value: MutableSequence[Any]) -> None:
        self._keys = value

    def seek(self, idx: Any) -> None:
        """Position the reader at the record stored under key ``idx``."""
        self._live_reader()
        self._pos = self.idx[idx]

    def read_idx(self, idx: Any) -> bytes | None:
        """The record stored under key ``idx``."""
        # The per-record hot path: one lookup, one framed read. Until the
        # `idx` dict is asked for (or assigned), the index's own table
        # answers: a flat list for the usual dense integer keys, which is
        # built several times faster than a million-entry dict.
        reader = self._reader if self._reader is not None else self._live_reader()
        offsets = self._idx
        if self._index is not None and (
            offsets is None or (type(offsets) is OffsetMap and not offsets.edited)
        ):
            offset = self._index.offset_of(idx)
        else:
            offset = (offsets if offsets is not None else self.idx)[idx]
        data, self._pos = reader.read_next(offset)
        return data

    def write_idx(self, idx: Any, buf: bytes | bytearray | memoryview) -> None:
        """Append ``buf`` under key ``idx`` and record it in the ``.idx``."""
        if isinstance(buf, str):
            raise TypeError("write_idx() takes bytes, not str; encode the text first")
        writer = self._writer if self._writer is not None else self._live_writer()
        key = self.key_type(idx)  # (once, as MXNet: the writer takes it as it is)
        # Per-record path (no cast(): it builds a generic alias a call). The
        # write-mode dict and list exist since open().
        self._idx[key] = writer.write_typed(key, buf)  # type: ignore[attr-defined,index]
        self._keys.append(key)  # type: ignore[union-attr]


def pack_img(
    header: IRHeader | tuple[Any, Any, Any, Any],
    img: np.ndarray,
    quality: int = 95,
    img_fmt: str = ".jpg",
) -> bytes:
    """Encode a BGR (or gray, or BGRA) array like OpenCV and ``pack`` it."""
    from ..imaging.codec import encode_bgr

    return pack(header, encode_bgr(img, img_fmt, quality))


def unpack_img(
    s: bytes | bytearray | memoryview, iscolor: int = -1
) -> tuple[IRHeader, np.ndarray | None]:
    """``unpack`` and decode the image to a BGR array like ``cv2.imdecode``.

    ``iscolor``: 1 colour (BGR), 0 gray (2-D), -1 as stored. An undecodable
    payload gives ``None``, as in MXNet.
    """
    from ..imaging.codec import decode_bgr_or_none

    header, payload = unpack(s)
    return header, decode_bgr_or_none(payload, iscolor)
