"""The one exception family of im2rec.

Every error the library raises on purpose is an :class:`Im2RecError`; the CLI
turns each into a one-line ``Error: ...`` message and exit code 1. Messages
name the file and the byte offset, line or key, and say what to do next.

Several classes also derive from the builtin that MXNet (or Python) raised for
the same mistake, so code written against ``mx.recordio`` that catches
``ValueError`` or ``FileNotFoundError`` keeps working::

    Im2RecError
    ├── RecordFormatError (ValueError)      a .rec frame or header is not what the format allows
    │   ├── NotRecordIOError                not a .rec at all: a list, an index (CLI: exit 2)
    │   ├── TruncatedRecordError            the file ends inside a header, payload or split record
    │   └── RecordTooLargeError             a record of 2**29 bytes or more cannot be framed
    ├── IndexFormatError (ValueError)       a malformed .idx line, an offset past the end
    │   └── DuplicateKeyError               the same key twice in one index
    ├── MissingKeyError (KeyError)          no record has the key asked for (names the .idx)
    ├── MissingFileError (FileNotFoundError)
    ├── ModeError (AssertionError)          read on a writer, write on a reader, use after close
    ├── ImageCodecError (ValueError)        an image could not be encoded or decoded
    │   └── ImageTooLargeError              more pixels than the limit (a bomb, or an output size)
    ├── ConfigError (ValueError)            option values that do not fit together (CLI: exit 2)
    │   └── UnknownOptionError (TypeError)  a keyword argument im2rec does not know
    ├── OutputError (OSError)               a link or folder where an output goes (never followed)
    └── DatasetError                        an input folder or list cannot be used as it is
        └── EmptyRecError                   an export or conversion of a .rec holding no records
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DatasetError",
    "DuplicateKeyError",
    "EmptyRecError",
    "ImageCodecError",
    "ManifestError",
    "ImageTooLargeError",
    "Im2RecError",
    "IndexFormatError",
    "MissingFileError",
    "MissingKeyError",
    "NotRecordIOError",
    "ModeError",
    "OutputError",
    "RecordFormatError",
    "RecordTooLargeError",
    "TruncatedRecordError",
    "UnknownOptionError",
]


class Im2RecError(Exception):
    """Base class of every error im2rec raises on purpose."""


class RecordFormatError(Im2RecError, ValueError):
    """A ``.rec`` file breaks the RecordIO framing or header layout."""


class NotRecordIOError(RecordFormatError):
    """The file given as a ``.rec`` is no RecordIO file at all, but what
    people give a ``.rec`` command by mistake (a list, an index, an image):
    a usage mistake, which the command line reports with exit code 2."""

    exit_code = 2


class TruncatedRecordError(RecordFormatError):
    """A ``.rec`` file ends in the middle of a record."""


class RecordTooLargeError(RecordFormatError):
    """A record is too large for the 29-bit length field."""


class IndexFormatError(Im2RecError, ValueError):
    """A ``.idx`` file has a malformed line or an impossible offset."""


class ManifestError(Im2RecError, ValueError):
    """A JSON file im2rec writes beside its outputs (a pack or shard
    manifest, a resume state) is malformed, or from a newer im2rec."""


class DuplicateKeyError(IndexFormatError):
    """The same key appears twice in one index."""


class MissingKeyError(Im2RecError, KeyError):
    """No record is stored under the key asked for; a ``KeyError`` (as a
    dict says so, and as MXNet raised it), whose message names the index
    and the keys it has."""

    def __str__(self) -> str:  # (KeyError's own quotes its argument)
        return str(self.args[0]) if self.args else ""


class MissingFileError(Im2RecError, FileNotFoundError):
    """An input file (``.rec``, ``.idx``, image) does not exist."""


class ModeError(Im2RecError, AssertionError):
    """An operation that the object's mode or state does not allow.

    Derives from ``AssertionError`` because that is what ``mx.recordio``
    raised for ``read()`` on a writer and ``write()`` on a reader.
    """


class ImageCodecError(Im2RecError, ValueError):
    """An image could not be encoded or decoded."""


class ImageTooLargeError(ImageCodecError):
    """An image, or the image an operation would make from it, has more
    pixels than :func:`im2rec.imaging.codec.pixel_limit` allows. ``output`` tells
    which: False for the stored image (a decompression bomb), True for a
    result (an extreme aspect ratio resized, a contact sheet)."""

    def __init__(self, message: str, *, output: bool = False):
        super().__init__(message)
        self.output = output


class ConfigError(Im2RecError, ValueError):
    """Option values that are invalid or do not fit together."""


class UnknownOptionError(ConfigError, TypeError):
    """A keyword argument that is not an option (MXNet ignored such typos)."""


class DatasetError(Im2RecError):
    """An input folder or list cannot be used as it is (no images, an
    unreadable folder, a symlink loop, ...)."""


class EmptyRecError(DatasetError):
    """A ``.rec`` of no records given to a command that writes a dataset
    from it (an export, a conversion): it writes nothing, as the imports
    write nothing from inputs of no samples or rows."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name}: holds no records (0 bytes); nothing was written")


class OutputError(Im2RecError, OSError):
    """An output file cannot be created where it belongs: a symlink or a
    folder is in the way (im2rec never writes through a link), or a file
    to continue (``--resume``) is not a plain file of its own."""
