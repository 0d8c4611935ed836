"""Reused output arrays (im2rec.training.augment.reuse): memory comes back only when
nothing refers to an array any more."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest
from PIL import Image

from im2rec.training.augment import Augmenter, reuse


def address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def fresh_shape(tag: int) -> tuple[int, int, int]:
    # a shape no other test used, so each test starts with an empty pool
    return (3, 17 + tag, 19)


def test_a_dropped_array_is_reused() -> None:
    shape = fresh_shape(0)
    a = reuse.new_array(shape, "float32")
    where = address(a)
    del a
    b = reuse.new_array(shape, "float32")
    assert address(b) == where
    assert b.shape == shape and b.dtype == np.float32


@pytest.mark.parametrize(
    "hold",
    [
        lambda a: a,
        lambda a: a[1:, ::2],  # a view
        lambda a: a.reshape(-1),
        lambda a: memoryview(a),  # a buffer export
        lambda a: [a],
        lambda a: np.frombuffer(a, np.uint8),  # a view through the buffer protocol
    ],
    ids=["array", "view", "reshape", "memoryview", "list", "frombuffer"],
)
def test_an_array_still_held_in_any_way_is_not_handed_out_again(hold: object) -> None:
    shape = fresh_shape(1)
    a = reuse.new_array(shape, "float32")
    a[...] = 7.0
    where = address(a)
    keep = hold(a)  # type: ignore[operator]
    del a
    others = [reuse.new_array(shape, "float32") for _ in range(5)]
    assert where not in {address(o) for o in others}
    for o in others:
        o[...] = -1.0
    assert keep is not None
    del keep
    assert where in {address(reuse.new_array(shape, "float32")) for _ in range(8)}


def test_torch_tensors_sharing_the_memory_hold_it() -> None:
    torch = pytest.importorskip("torch")
    shape = fresh_shape(2)
    a = reuse.new_array(shape, "float32")
    a[...] = 3.0
    tensor = torch.from_numpy(a)
    del a
    for _ in range(5):
        reuse.new_array(shape, "float32")[...] = 0.0
    assert float(tensor.min()) == 3.0 == float(tensor.max())


def test_kept_arrays_beyond_the_pool_are_all_distinct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reuse, "POOL_BYTES", 1)  # a pool of two
    shape = fresh_shape(3)
    kept = [reuse.new_array(shape, "float64") for _ in range(10)]
    assert len({address(a) for a in kept}) == 10
    pool = reuse._local.pools[(shape, np.dtype("float64"))]
    assert len(pool.arrays) == 2


def test_each_thread_has_its_own_arrays() -> None:
    shape = fresh_shape(4)
    mine = reuse.new_array(shape, "float32")
    where = address(mine)
    del mine
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.append(address(reuse.new_array(shape, "f4"))))
    worker.start()
    worker.join()
    assert seen and seen[0] != where  # the array this thread keeps in its pool
    assert address(reuse.new_array(shape, "float32")) == where


def test_only_a_few_shapes_are_kept() -> None:
    for tag in range(10, 10 + 2 * reuse.SHAPES):
        reuse.new_array(fresh_shape(tag), "uint8")
    assert len(reuse._local.pools) <= reuse.SHAPES


def jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)).save(out, "JPEG")
    return out.getvalue()


def test_augmenter_samples_kept_in_a_batch_keep_their_values() -> None:
    # what a DataLoader worker does: 8 samples held until collated, then dropped
    augment = Augmenter((3, 32, 32), rand_crop=True, rand_mirror=True, mean=(100.0,) * 3)
    payloads = [jpeg(seed) for seed in range(8)]
    for _ in range(3):
        batch = [augment(p) for p in payloads]
        copies = [b.copy() for b in batch]
        assert len({address(b) for b in batch}) == len(batch)
        extra = [augment(p) for p in payloads]  # more calls while the batch is held
        assert all(np.array_equal(b, c) for b, c in zip(batch, copies, strict=True))
        del batch, copies, extra
