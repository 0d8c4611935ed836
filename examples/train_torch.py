"""Train a tiny PyTorch model on a packed ``.rec``, both ways the README shows.

    python examples/train_torch.py OUTDIR

Lists and packs the bundled ``examples/example`` images into OUTDIR, then runs
two epochs with ``ImageRecordIter`` and two with ``RecordDataset`` in a
``DataLoader`` (CPU only; needs torch).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader

from im2rec.listing import ListOptions, make_lists
from im2rec.packing import PackOptions, pack_list
from im2rec.training import Augmenter, ImageRecordIter, RecordDataset

MEAN, STD = (123.68, 116.78, 103.94), (58.4, 57.12, 57.38)


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, 3),
    )  # fmt: skip


class Trainer:
    def __init__(self) -> None:
        self.net, self.loss_fn = model(), nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> float:
        loss = self.loss_fn(self.net(images), labels.long())
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss.item())


def train_with_iterator(rec: Path) -> float:
    trainer = Trainer()
    with ImageRecordIter(
        path_imgrec=str(rec), path_imgidx=str(rec.with_suffix(".idx")),
        data_shape=(3, 32, 32), batch_size=4, shuffle=True, seed=0,
        random_resized_crop=True, min_random_area=0.08, rand_mirror=True,
        mean_r=MEAN[0], mean_g=MEAN[1], mean_b=MEAN[2], std_r=STD[0], std_g=STD[1], std_b=STD[2],
        preprocess_threads=2, verbose=False,
    ) as train:  # fmt: skip
        for epoch in range(2):
            for batch in train:
                n = batch.data[0].shape[0] - batch.pad
                images = torch.from_numpy(batch.data[0][:n])
                labels = torch.from_numpy(batch.label[0][:n])
                loss = trainer.step(images, labels)
            print(f"ImageRecordIter epoch {epoch}: loss {loss:.3f}")
    return loss


def train_with_dataloader(rec: Path) -> float:
    trainer = Trainer()
    augment = Augmenter(
        (3, 32, 32), random_resized_crop=True, min_random_area=0.08, rand_mirror=True,
        mean=MEAN, std=STD,
    )  # fmt: skip
    dataset = RecordDataset(rec, output="bytes", transform=augment)
    loader = DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2)
    for epoch in range(2):
        for images, labels in loader:
            loss = trainer.step(images, labels)
        print(f"RecordDataset epoch {epoch}: loss {loss:.3f}")
    return loss


def main(out: Path) -> None:
    images = Path(__file__).resolve().parent / "example"
    make_lists(images, out / "example", ListOptions(recursive=True))
    pack_list(out / "example.lst", PackOptions(pass_through=True))
    rec = out / "example.rec"
    train_with_iterator(rec)
    train_with_dataloader(rec)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
