"""``rec import webdataset``'s reading of a shard (``formats.tars.samples``,
plain or compressed) and each sample's record (``formats.wds_import``):
any bytes as a shard. An im2rec error, never another exception, never
memory or time out of proportion to the input."""

from __future__ import annotations

import atheris
from _harness import run, scratch_file

with atheris.instrument_imports():
    from im2rec.errors import Im2RecError
    from im2rec.formats.tars import samples
    from im2rec.formats.wds_import import _record


def test_one(data: bytes) -> None:
    path = scratch_file(data, "shard.tar")
    try:
        for number, sample in enumerate(samples(path)):
            for value in sample.fields.values():
                bytes(value)
            _record(sample, None, number)
            _record(sample, "label", number)
    except Im2RecError:
        pass


if __name__ == "__main__":
    run(test_one)
