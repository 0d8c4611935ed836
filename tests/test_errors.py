"""The one exception family: every class is an Im2RecError, and each also
is the builtin MXNet or Python raised for the same mistake, so code that
caught those keeps working."""

from __future__ import annotations

import pytest

import im2rec.errors as errors


def test_every_class_is_one_of_ours_and_exported() -> None:
    classes = [getattr(errors, name) for name in errors.__all__]
    assert all(issubclass(c, errors.Im2RecError) for c in classes)
    defined = {
        n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, Exception)
    }
    assert defined == set(errors.__all__)


@pytest.mark.parametrize(
    ("ours", "builtin"),
    [
        (errors.RecordFormatError, ValueError),
        (errors.TruncatedRecordError, ValueError),
        (errors.IndexFormatError, ValueError),
        (errors.DuplicateKeyError, ValueError),
        (errors.ManifestError, ValueError),
        (errors.MissingFileError, FileNotFoundError),
        (errors.ModeError, AssertionError),
        (errors.ImageCodecError, ValueError),
        (errors.ConfigError, ValueError),
        (errors.UnknownOptionError, TypeError),
        (errors.OutputError, OSError),
    ],
)
def test_each_is_also_the_builtin_mxnet_raised(
    ours: type[Exception], builtin: type[Exception]
) -> None:
    with pytest.raises(builtin, match="names the file"):
        raise ours("a.rec: names the file")


def test_an_image_too_large_says_whether_it_is_the_output() -> None:
    assert errors.ImageTooLargeError("bomb").output is False
    assert errors.ImageTooLargeError("sheet", output=True).output is True
    assert issubclass(errors.ImageTooLargeError, errors.ImageCodecError)
