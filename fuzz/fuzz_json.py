"""A WebDataset sample's ``.json`` and ``.cls`` (``formats.wds_import``):
any bytes. The record is made or the sample skipped with a reason; the
shortcut for ``rec export``'s own ``.json`` gives what the general path
gives, or stands aside."""

from __future__ import annotations

import atheris
from _harness import run

with atheris.instrument_imports():
    from im2rec.formats.tars import Sample
    from im2rec.formats.wds_import import _exported_fast, _general


def test_one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    fields: dict[str, bytes] = {"jpg": b"\xff\xd8\xff\xd9"}
    if fdp.ConsumeBool():
        fields["cls"] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 70))
    fields["json"] = fdp.ConsumeBytes(fdp.remaining_bytes())
    sample = Sample("k", "shard.tar", dict(fields))
    number = 7
    general = _general(sample, None, number)
    fast = _exported_fast(sample, number)
    if fast is not None:
        assert fast == general, (fields["json"], fast, general)
    _general(sample, "label", number)


if __name__ == "__main__":
    run(test_one)
