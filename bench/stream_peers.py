"""litdata's and MosaicML Streaming's datasets on bench_stream.py's images,
run by .venv-stream's interpreter (``make stream-peers``), which has both,
and im2rec for the same transform.

    .venv-stream/bin/python bench/stream_peers.py WHICH IMAGES_DIR S3_URL PROXY_URL WORKERS WORK

``WHICH`` is ``litdata`` or ``mosaic``. ``IMAGES_DIR`` holds the ``.rec``'s
JPEG payloads and ``labels.json`` (as for FFCV). Each is written in the
peer's own format (litdata's ``optimize``, MosaicML's ``MDSWriter``: the
JPEG bytes as they are, 4 MB chunks like bench_stream's blocks), uploaded
to the local S3 server at ``S3_URL``, then read back through ``PROXY_URL``
(the same latency and bandwidth as im2rec's rows): shuffled, one epoch
with an empty cache, then one with the cache filled; each sample decoded
and augmented by im2rec's ``Augmenter`` (RandomResizedCrop 224, flip,
mean/std), batches of 64 collated by torch's ``default_collate``,
``WORKERS`` DataLoader workers. Prints one JSON line.
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

import boto3

which, folder, s3_url, proxy_url, workers, work = sys.argv[1:7]
folder, work, workers = Path(folder), Path(work), int(workers)
labels = json.loads((folder / "labels.json").read_text())
files = sorted(folder.glob("*.jpg"))
BUCKET, PREFIX = "bench", f"{which}-data"
os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ALLOW_HTTP="true",
                  AWS_DEFAULT_REGION="us-east-1")  # fmt: skip


def upload(local: Path) -> None:
    client = boto3.client("s3", endpoint_url=s3_url)
    for path in sorted(local.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), BUCKET, f"{PREFIX}/{path.relative_to(local)}")


def read_through_proxy() -> None:
    # both clients build their boto3 sessions from these
    os.environ["AWS_ENDPOINT_URL"] = proxy_url
    os.environ["S3_ENDPOINT_URL"] = proxy_url


from im2rec.training import Augmenter  # noqa: E402

augment = Augmenter((3, 224, 224), random_resized_crop=True, min_random_area=0.08,
                    min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3, rand_mirror=True,
                    mean=(123.68, 116.78, 103.94), std=(58.4, 57.12, 57.38))  # fmt: skip


if which == "litdata":
    from litdata import StreamingDataLoader, optimize
    from litdata import StreamingDataset as Base
    from litdata.streaming import downloader

    # litdata fetches chunks with obstore, whose client refuses a plain-http
    # endpoint unless told to allow it, and litdata passes it fixed options:
    # the local server is http (a real store is https), so allow it here
    # (at the top level: its loader's workers import this file)
    downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = "true"
else:
    import types

    # MosaicML's package imports its vision dataset classes, which import
    # torchvision, whose PyPI build does not load beside this CPU torch; they
    # are not used here (StreamingDataset and MDSWriter are streaming.base)
    sys.modules["streaming.vision"] = types.ModuleType("streaming.vision")
    from streaming import MDSWriter
    from streaming import StreamingDataset as Base


class Data(Base):  # (at the top level: litdata's loader pickles it for its workers)
    """The peer's StreamingDataset, giving augmented samples."""

    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return augment(sample["image"]), sample["label"]


def item(i: int) -> dict:
    """One sample for litdata's ``optimize`` (its workers import this file)."""
    return {"image": files[i].read_bytes(), "label": labels[i]}


def main() -> None:
    local = work / "written"
    cache = work / "cache"
    if which == "litdata":
        optimize(fn=item, inputs=list(range(len(files))), output_dir=str(local), chunk_bytes="4MB",
                 num_workers=1)  # fmt: skip
        upload(local)
        read_through_proxy()

        dataset = Data(f"s3://{BUCKET}/{PREFIX}", shuffle=True, seed=0, cache_dir=str(cache))
        loader = StreamingDataLoader(dataset, batch_size=64, num_workers=workers)
    else:
        from torch.utils.data import DataLoader

        with MDSWriter(out=str(local), columns={"image": "bytes", "label": "int"},
                       size_limit=4 << 20) as out:  # fmt: skip
            for f, label in zip(files, labels, strict=True):
                out.write({"image": f.read_bytes(), "label": label})
        upload(local)
        read_through_proxy()

        dataset = Data(remote=f"s3://{BUCKET}/{PREFIX}", local=str(cache), shuffle=True,
                       shuffle_seed=0, batch_size=64)  # fmt: skip
        loader = DataLoader(dataset, batch_size=64, num_workers=workers)

    rates, counts = [], []
    for _epoch in range(2):  # the cache empty, then filled
        t0, n, total = time.perf_counter(), 0, 0
        for images, label in loader:
            assert tuple(images.shape[1:]) == (3, 224, 224)
            n += len(images)
            total += int(label.sum())
        rates.append(n / (time.perf_counter() - t0))
        counts.append((n, total))
    shutil.rmtree(cache, ignore_errors=True)
    print(
        json.dumps(
            {
                "cold": rates[0],
                "warm": rates[1],
                "images": counts[0][0],
                "label_sum": counts[0][1],
                "same_both_epochs": counts[0] == counts[1],
            }
        )
    )


if __name__ == "__main__":  # litdata's optimize starts its workers with spawn
    main()
