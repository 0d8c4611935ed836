"""Several recs as one dataset: proportions held each epoch, each source's
order a function of (seed, epoch), resuming, ranks, labels kept apart, and
a DataLoader batch decoded in place from both sources."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from im2rec.errors import ConfigError
from im2rec.training import Augmenter, MixedDataset, MixtureSampler, RecordDataset

from .test_iterator import jpeg_rec, write_rec


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("mix")
    big = jpeg_rec(folder / "big.rec", 50, (32, 24))  # labels 0..49
    small = write_rec(folder / "small.rec", _jpegs(12), [float(i % 3) for i in range(12)])
    return big, small


def _jpegs(count: int) -> list[bytes]:
    import io

    from ..conftest import photo

    out = []
    for i in range(count):
        buf = io.BytesIO()
        photo(20, 16, 100 + i).save(buf, "JPEG")
        out.append(buf.getvalue())
    return out


def mixture(sources: tuple[Path, Path], **kw: object) -> MixedDataset:
    return MixedDataset([RecordDataset(p, output="bytes", labels="float") for p in sources], **kw)  # type: ignore[arg-type]


def test_proportions_hold_every_epoch_and_orders_repeat(sources: tuple[Path, Path]) -> None:
    mixed = mixture(sources)
    sampler = MixtureSampler(mixed, [0.7, 0.3], epoch_size=100, seed=4)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        draws = list(sampler)
        which = Counter(mixed.source_of(i)[0] for i in draws)
        assert which == {0: 70, 1: 30}  # exactly the shares, every epoch
        # in each half of the epoch, within sampling noise of them
        first = sum(mixed.source_of(i)[0] == 0 for i in draws[:50])
        assert 25 <= first <= 45
        small = [mixed.source_of(i)[1] for i in draws if mixed.source_of(i)[0] == 1]
        assert sorted(small[:12]) == list(range(12))  # a lap of the small source: each once
        epochs.append(draws)
    again = MixtureSampler(mixed, [0.7, 0.3], epoch_size=100, seed=4)
    again.set_epoch(1)
    assert list(again) == epochs[1] and epochs[0] != epochs[1]


def test_resuming_and_ranks(sources: tuple[Path, Path]) -> None:
    mixed = mixture(sources)
    whole = MixtureSampler(mixed, [1, 1], epoch_size=60, seed=2)
    whole.set_epoch(3)
    draws = list(whole)
    one = MixtureSampler(mixed, [1, 1], epoch_size=60, seed=2)
    one.set_epoch(3)
    taken = []
    for i in one:
        taken.append(i)
        if len(taken) == 25:
            break
    state = one.state_dict()
    assert state == {"sampler": "mixture", "seed": 2, "epoch": 3, "samples": 60,
                     "num_replicas": 1, "rank": 0, "start": 25, "resized": []}  # fmt: skip
    resumed = MixtureSampler(mixed, [1, 1], epoch_size=60, seed=2)
    resumed.load_state_dict(state)
    assert len(resumed) == 35 and taken + list(resumed) == draws
    parts = []
    for rank in range(3):
        ranked = MixtureSampler(mixed, [1, 1], epoch_size=60, seed=2, num_replicas=3, rank=rank)
        ranked.set_epoch(3)
        parts.append(list(ranked))
    assert [len(p) for p in parts] == [20, 20, 20]
    assert sorted(i for p in parts for i in p) == sorted(draws)  # the same draws, shared out


def test_labels_stay_apart(sources: tuple[Path, Path]) -> None:
    offset = mixture(sources)
    assert offset.offsets == [0, 50]  # 50 labels in the first (no class map: scanned)
    assert offset[50][1] == 0.0  # (float labels are not classes: kept as they are)
    by_source = mixture(sources, labels="source")
    assert by_source[0][1] == (0, 0.0) and by_source[51][1] == (1, 1.0)
    with pytest.raises(ConfigError, match="need 2 weights"):
        MixtureSampler(offset, [1.0])
    with pytest.raises(IndexError):
        offset[62]


def test_a_dataloader_batch_is_decoded_in_place_from_both(sources: tuple[Path, Path]) -> None:
    torch = pytest.importorskip("torch")
    augment = Augmenter((3, 16, 16), rand_crop=True)
    datasets = [
        RecordDataset(p, output="bytes", transform=augment, labels="class") for p in sources
    ]
    mixed = MixedDataset(datasets)
    sampler = MixtureSampler(mixed, [0.5, 0.5], epoch_size=40, seed=1)
    loader = torch.utils.data.DataLoader(mixed, batch_size=8, sampler=sampler, num_workers=2,
                                         collate_fn=mixed.collate)  # fmt: skip
    labels = []
    for images, batch_labels in loader:
        assert images.shape == (8, 3, 16, 16) and images.dtype == torch.float32
        labels += batch_labels.tolist()
    assert len(labels) == 40
    assert sum(label >= 50 for label in labels) == 20  # the small source's, offset past the big's
    plain = [mixed[i] for i in list(sampler)[:8]]
    assert sorted(label for _, label in plain) == sorted(labels[:8])
    assert np.all(np.isfinite(images.numpy()))


def test_detection_sources_keep_their_classes_apart(tmp_path: Path) -> None:
    """A mixture of two detection recs gave both sources' class 0 as class
    0: the targets' labels were not offset (and a source without a class map
    counted no classes)."""
    from ..boxsets import det_rec

    first = det_rec(tmp_path / "a.rec", [(30, 20)] * 2, [[[0, 0.1, 0.1, 0.5, 0.5, 0]],
                                                        [[2, 0.2, 0.2, 0.6, 0.6, 0]]])  # fmt: skip
    second = det_rec(tmp_path / "b.rec", [(30, 20)], [[[0, 0.1, 0.1, 0.5, 0.5, 0],
                                                       [1, 0.3, 0.3, 0.9, 0.9, 0]]])  # fmt: skip
    sources = [RecordDataset(p, output="bytes", labels="boxes") for p in (first, second)]
    mixed = MixedDataset(sources)
    assert mixed.offsets == [0, 3]  # (no class map: the first's largest class is 2)
    assert np.asarray(mixed[2][1]["labels"]).tolist() == [3, 4]
    assert np.asarray(mixed[1][1]["labels"]).tolist() == [2]
    (tmp_path / "a.classes.tsv").write_text("0\tcat\n1\tdog\n2\tbird\n3\tfish\n")
    named = MixedDataset(
        [RecordDataset(p, output="bytes", labels="boxes") for p in (first, second)]
    )
    assert named.offsets == [0, 4] and np.asarray(named[2][1]["labels"]).tolist() == [4, 5]
