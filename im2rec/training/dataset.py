"""Reading packed datasets back for training: a map-style dataset.

:class:`RecordDataset` is what ``torch.utils.data.DataLoader`` needs (``len``
and ``ds[i]``) without importing torch. It holds a reader that pickles as
paths plus the loaded index, so each ``DataLoader`` worker, under ``fork`` or
``spawn``, opens the file again on first use.

InsightFace's MS1M/Glint360K files put a header record at key 0 whose two
labels are ``(first identity key, end of identity keys)``: the images are
keys ``1 .. first-1`` and one record per identity follows them. With
``layout="auto"`` (the default) such a file is recognised and only its image
records are exposed, each labelled with its identity (``label[0]``, as
InsightFace's ``MXFaceDataset`` reads it).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from PIL import UnidentifiedImageError

from ..errors import ConfigError, DatasetError, ImageCodecError, ImageTooLargeError
from ..imaging.codec import DECODE_ERRORS, Upright
from ..imaging.columns import SCALARS
from ..imaging.jpeg import dct_scale
from ..listing.classmap import class_map_beside, disagreeing_map, read_class_map
from ..recordio import IndexedRecordReader, unpack
from ..recordio.faces import face_header
from ..recordio.header import is_class_index
from ..recordio.reader import SPAN_LIMIT
from ..storage import is_url
from ..storage.blockcache import BlockCache
from .augment import Augmenter, process_rng
from .augment.fused import Writer
from .detdraw import DetTransform
from .loading import Batch, collate, new_batch
from .targets import (
    detection_collate,
    detection_objects,
    detection_target,
    image_size,
    is_v2,
    tensor_target,
    v2_image,
)
from .vocabulary import skips_corrupt

__all__ = ["RecordDataset"]

Output = Literal["pil", "numpy", "bytes"]
Layout = Literal["auto", "plain", "insightface"]


class RecordDataset:
    """``ds[i] -> (image, label)`` over the records of a ``.rec``/``.idx``.

    ``output``: ``"pil"`` (an RGB ``PIL.Image``), ``"numpy"`` (HxWx3 uint8
    RGB) or ``"bytes"`` (the stored payload, undecoded). ``labels="class"``
    (the default) gives what ``torchvision``'s ``ImageFolder`` gives: an
    ``int`` class index for a single-label record (MXNet stores it as a
    float32; ``nn.CrossEntropyLoss`` wants integers), and a float32 array
    for a multi-label record (``flag > 0``); a single label that is not a
    whole number is an error that says to pass ``labels="float"``, which
    gives every single label as MXNet's float. ``labels="boxes"`` reads a
    detection rec: the label is a target dict as torchvision's detection
    models take it (:mod:`~im2rec.training.targets`: boxes in pixels of the
    image the sample holds, for ``"bytes"`` the stored image's, whatever
    size the label's header names; ``tv_tensors.BoundingBoxes`` where
    torchvision is installed, int64 labels; none for a label of the header
    alone, an image ``rec list --keep-empty`` kept), batched by
    :attr:`collate_boxes`. ``transform`` and ``target_transform`` are
    applied to the image and label, ``transforms`` to both at once (``(image, target) -> (image,
    target)``, as torchvision's datasets take it; with ``labels="boxes"``
    the only way to transform the image, so the boxes move with it); pass
    picklable callables for ``spawn`` workers. A
    ``torchvision.transforms.v2`` transform is handed an ``output="numpy"``
    image as a ``tv_tensors.Image`` (CxHxW, sharing its memory), since v2
    passes numpy arrays through untouched (and would take a detection
    target's labels for the image); it cannot take ``output="bytes"``
    (refused: use :class:`~im2rec.training.detdraw.DetTransform` or your own
    decoding there). Without an ``.idx`` the file
    is indexed in memory once (keys 0..N-1; a warning says so), with
    ``missing_index="scan"``, the default; ``"error"`` refuses.
    ``min_size=(w, h)`` decodes JPEGs at the smallest DCT scale (1/2, 1/4,
    1/8) that keeps both sides at least that size: for training below half
    the stored resolution. A URL read with ``cache`` (a folder, or a
    :class:`~im2rec.storage.blockcache.BlockCache` with its size budget) is
    read through whole blocks kept in that folder: with a
    :class:`~im2rec.training.blockorder.BlockSampler`, an epoch makes a
    request per block, not per sample, and a later one none at all if the
    dataset fits the budget.

    ``classes`` and ``class_to_idx`` are as ``torchvision``'s ``ImageFolder``
    has them: the class names in label order and the name -> label map,
    from the class map ``rec list`` wrote (``class_map``; by default
    ``PREFIX.classes.tsv`` beside a local ``.rec``, see
    :func:`~im2rec.listing.classmap.class_map_beside`); empty when there is
    none. A map found beside the ``.rec`` that labels a class otherwise than
    a sibling split's (:func:`~im2rec.listing.classmap.disagreeing_map`) is
    refused (DatasetError naming both); ``class_map=`` reads with the map
    given.

    An image that does not decode (in this class or in ``transform``) raises
    :class:`~im2rec.errors.ImageCodecError` naming its key and byte offset.
    With ``on_corrupt="skip"`` the next record that decodes is returned in
    its place (wrapping around), with a warning; ``skipped`` lists ``(key,
    offset, reason)`` for the records skipped in this process (each
    ``DataLoader`` worker keeps its own).
    """

    def __init__(
        self,
        rec: str | os.PathLike[str],
        idx: str | os.PathLike[str] | None = None,
        *,
        output: Output = "pil",
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[Any], Any] | None = None,
        layout: Layout = "auto",
        missing_index: Literal["error", "scan"] = "scan",
        min_size: tuple[int, int] | None = None,
        on_corrupt: Literal["raise", "skip"] = "raise",
        labels: Literal["class", "float", "boxes"] = "class",
        transforms: Callable[[Any, Any], tuple[Any, Any]] | None = None,
        storage_options: dict[str, Any] | None = None,
        cache: BlockCache | str | os.PathLike[str] | None = None,
        class_map: str | os.PathLike[str] | None = None,
    ):
        if layout not in ("auto", "plain", "insightface"):
            raise ValueError(f"layout must be 'auto', 'plain' or 'insightface', not {layout!r}")
        skip_corrupt = skips_corrupt(on_corrupt)
        if labels not in ("class", "float", "boxes"):
            raise ValueError(f"labels must be 'class', 'float' or 'boxes', not {labels!r}")
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ConfigError("pass transforms= (image and target together) or transform= and "
                              "target_transform=, not both")  # fmt: skip
        if labels == "boxes" and transform is not None:
            raise ConfigError(
                "labels='boxes' with transform=: a transform of the image alone would leave "
                "the boxes where they were; pass transforms=, which takes (image, target) and "
                "returns both (torchvision.transforms.v2 moves boxes with the image)"
            )
        if output not in ("pil", "numpy", "bytes"):
            raise ValueError(f"output must be 'pil', 'numpy' or 'bytes', not {output!r}")
        drawer = transform if isinstance(transform, Augmenter) else transforms
        if isinstance(drawer, Augmenter | DetTransform) and output != "bytes":
            raise ConfigError(
                f"{type(drawer).__name__} decodes the stored image bytes itself (only the part "
                f"its crop keeps): pass output='bytes', not {output!r}"
            )
        #: whether the transform is torchvision's v2, which takes numpy images as tv_tensors
        self.v2 = is_v2(transforms if transforms is not None else transform)
        if self.v2 and output == "bytes":
            raise ConfigError(
                "output='bytes' with a torchvision.transforms.v2 transform: v2 cannot move "
                "undecoded bytes, and would move the boxes (or take a label for the image) "
                "while the image stays as it was; use output='pil' or 'numpy', or decode the "
                "bytes in a transform of your own first (DetTransform and Augmenter take bytes)"
            )
        if min_size is not None and not (
            isinstance(min_size, tuple | list)
            and len(min_size) == 2
            and all(isinstance(v, int | np.integer) and v >= 1 for v in min_size)
        ):
            raise ValueError(f"min_size must be (width, height) in pixels, not {min_size!r}")
        self.min_size = None if min_size is None else (int(min_size[0]), int(min_size[1]))
        if cache is not None and not isinstance(cache, BlockCache):
            cache = BlockCache(os.fspath(cache))
        self.reader = IndexedRecordReader(
            rec, idx, missing_index=missing_index, storage_options=storage_options, cache=cache
        )
        if self.reader.index_scanned:
            warnings.warn(
                f"{self.reader.name}: no .idx beside it, so its {len(self.reader):,} records "
                f"were indexed in memory (keys 0..N-1); `rec index {self.reader.name}` "
                "writes one and skips this walk next time",
                stacklevel=2,
            )
        self.output = output
        self.labels = labels
        self.transform = transform
        self.target_transform = target_transform
        self.transforms = transforms
        self.skip_corrupt = skip_corrupt
        self.skipped: list[tuple[Any, int, str]] = []
        # the keys served, in order: a view of the index's array, or a range
        # (no Python object a record: forked workers share these pages)
        self.keys: Sequence[Any] = self.reader.keys
        self.layout = self._detect(layout)
        if self.layout == "insightface":
            first = int(unpack(self.reader.read_key(0))[0].label[0])
            self.keys = range(1, first)
        if class_map is None and not is_url(rec):
            class_map = class_map_beside(rec)
            why = disagreeing_map(class_map) if class_map is not None else None
            if why is not None:  # (a split listed on its own: its labels are not its sibling's)
                raise DatasetError(
                    f"{self.reader.name}: {why}; or pass class_map= to read it with the map "
                    "you choose"
                )
        labels_of = read_class_map(class_map) if class_map is not None else {}
        #: the class names in label order (a label with no name: its number)
        self.classes: list[str] = [
            labels_of.get(k, str(k)) for k in range(max(labels_of, default=-1) + 1)
        ]
        #: class name -> label, as torchvision's ``ImageFolder.class_to_idx``
        self.class_to_idx: dict[str, int] = {name: k for k, name in labels_of.items()}

    def record_offsets(self) -> np.ndarray:
        """Where each sample's record starts in the file (int64), in the
        dataset's order: what :class:`~im2rec.training.blockorder.BlockSampler`
        groups into blocks."""
        index = self.reader.index
        if isinstance(self.keys, range):  # InsightFace's image keys
            return np.fromiter((index.offset_of(k) for k in self.keys), np.int64, len(self.keys))
        return np.asarray(index.offsets, np.int64)

    def _detect(self, layout: Layout) -> Literal["plain", "insightface"]:
        if layout != "auto":
            return layout
        if 0 not in self.reader.index:
            return "plain"
        header, payload = unpack(self.reader.read_key(0))
        # InsightFace's header record: two labels (the identity key range) and
        # no image; an ordinary multi-label image record has image bytes.
        return "insightface" if face_header(header, payload, len(self.keys)) else "plain"

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        return self._fetch(i, None)

    def __getitems__(self, indices: Sequence[int]) -> Sequence[tuple[Any, Any]]:
        """The samples at ``indices``, as ``[ds[i] for i in indices]`` gives
        them (torch's ``DataLoader`` calls this with a whole batch). With an
        :class:`~im2rec.training.augment.Augmenter` on ``output="bytes"``
        they are decoded into one array in shared memory, drawing the same
        random numbers in the same order, and returned as a
        :class:`~im2rec.training.loading.Batch`, which
        :meth:`collate` turns into tensors without a copy."""
        augment = self.transform
        draw = self.transforms
        if self.output == "bytes" and isinstance(draw, DetTransform) and indices:
            images, home = new_batch(len(indices), draw.augmenter.data_shape, "float32")
            return Batch(images, [self._fetch(i, images[j])[1] for j, i in enumerate(indices)],
                         home)  # fmt: skip
        if self.output != "bytes" or not isinstance(augment, Augmenter) or not indices:
            return [self._fetch(i, None) for i in indices]
        images, home = new_batch(len(indices), augment.data_shape, augment.dtype)
        write = augment.writer(process_rng())  # (looked up once a batch, not a sample)
        return Batch(images, self._fill(indices, images, write), home)

    def _fill(self, indices: Sequence[int], images: np.ndarray, write: Writer) -> list[Any]:
        """Decode the samples at ``indices`` into ``images``; their labels.
        Where the records can be read so (a local file of single-label
        records, no ``target_transform``), a run of samples at a time in C
        (:meth:`Writer.records <im2rec.training.augment.fused.Writer.records>`),
        and each sample that loop stops at (damage, a record with several
        labels, an image it leaves to Pillow) by :meth:`_fetch`, which
        finishes it as the per-sample path would: the same draws, errors and
        skips."""
        positions = np.asarray(indices)
        n = len(self.keys)
        native = write.batched and self.layout == "plain" and self.target_transform is None
        native = native and positions.dtype.kind in "iu" and positions.ndim == 1
        if native:
            positions = np.where(positions < 0, positions + n, positions).astype(np.int64)
            # (an index out of range: the per-sample path raises IndexError at its sample)
            native = positions.min() >= 0 and positions.max() < n
        source = self.reader.spans(positions) if native else None
        if source is None and native:  # a store's records: staged for the same C loop
            source = _staged(self.reader, positions)
        if source is None:
            return [self._fetch(i, images[j], write)[1] for j, i in enumerate(indices)]
        fd, starts, stops = source
        raw = np.zeros(len(positions), np.float32)
        labels: list[Any] = []
        j = 0
        classes = self.labels == "class"
        while j < len(positions):
            upto, outcome = write.records(
                fd, starts, stops, images, raw, None, j, SPAN_LIMIT, classes
            )
            # (with classes, the C loop took whole numbers only: the others
            # stop it, and _fetch raises for them as one sample at a time)
            done = raw[j:upto].astype(np.int64 if classes else np.float64)
            labels += done.tolist()
            if upto < len(positions):
                labels.append(self._fetch(int(indices[upto]), images[upto], write, outcome)[1])
            j = upto + 1
        return labels

    #: the ``collate_fn`` to give a ``DataLoader`` over this dataset
    #: (:func:`im2rec.training.loading.collate`)
    collate = staticmethod(collate)
    #: the ``collate_fn`` for ``labels="boxes"``: images and a list of
    #: targets (:func:`im2rec.training.targets.detection_collate`)
    collate_boxes = staticmethod(detection_collate)

    def _fetch(
        self, i: int, into: np.ndarray | None, write: Writer | None = None, outcome: Any = None
    ) -> tuple[Any, Any]:
        """Sample ``i``; ``outcome``: the C loop's word on it (:meth:`_fill`)."""
        n = len(self.keys)
        i = range(n)[i]  # IndexError past the end, as a sequence must (plain `for` loops)
        if not self.skip_corrupt:
            return self._item(i, into, write, outcome)
        for step in range(n):
            position = (i + step) % n
            try:
                return self._item(position, into, write, outcome if step == 0 else None)
            except ImageCodecError as exc:
                key = self.keys[position]
                offset = self.reader.index.offset_of(key)
                why = str(exc.__cause__ or exc)
                self.skipped.append((key, offset, why))
                warnings.warn(f"{exc}; skipped (on_corrupt='skip')", stacklevel=2)
        raise ImageCodecError(f"{self.reader.name}: none of its {n} records decodes")

    def _item(
        self, position: int, into: np.ndarray | None, write: Writer | None, outcome: Any = None
    ) -> tuple[Any, Any]:
        """The sample at ``position``; with ``into``, the transform (an
        ``Augmenter``, through ``write``) writes the image there, as its
        ``__call__`` would."""
        key = self.keys[position]
        if write is not None and self.layout == "plain":  # keys in index order: one pread
            record = self.reader.read_position(position)
        else:
            record = self.reader.read_key(key)
        header, payload = unpack(record)
        label: Any = header.label if header.flag else float(header.label)
        if self.layout == "insightface" and header.flag:  # [identity, aligned]: as MXFaceDataset
            label = float(header.label[0])
        if self.labels == "class" and isinstance(label, float):
            label = self._class_index(label, key)
        if self.output == "bytes":
            image: Any = payload
        else:
            image = self._decode(payload, key)
        drawn = isinstance(self.transforms, DetTransform)  # (normalised boxes: pixels once)
        if self.labels == "boxes":
            values = header.label if header.flag else None
            where = f"{self.reader.name}: record {key!r}"
            if drawn:
                label = detection_objects(values, where)
            else:
                label = tensor_target(detection_target(
                    values, lambda: self._canvas(image, payload, key), where
                ))  # fmt: skip
        if self.v2 and self.output == "numpy":  # (v2 passes a numpy array through untouched)
            image = v2_image(image)
        if self.transform is not None:
            try:
                if into is not None:
                    assert isinstance(self.transform, Augmenter)
                    if write is None:
                        write = self.transform.writer(process_rng())
                    write.finish(outcome, image, into)
                    image = into
                else:
                    image = self.transform(image)
            except ImageCodecError as exc:  # e.g. Augmenter on output="bytes"
                raise self._codec_error(key, exc) from exc
        if self.target_transform is not None:
            label = self.target_transform(label)
        if drawn and self.labels == "boxes":
            assert isinstance(self.transforms, DetTransform)
            image, label = self.transforms.draw_objects(image, label, out=into)
        elif drawn and into is not None:
            assert isinstance(self.transforms, DetTransform)
            image, label = self.transforms(image, label, out=into)
        elif self.transforms is not None:
            image, label = self.transforms(image, label)
        return image, label

    def _canvas(self, image: Any, payload: bytes, key: Any) -> tuple[float, float]:
        """The (width, height) of the sample's pixels (:func:`image_size`)."""
        try:
            return image_size(self.output, image, payload)
        except DECODE_ERRORS as exc:  # (bytes: a header that does not read)
            why = "not an image Pillow can read" if isinstance(exc, UnidentifiedImageError) else exc
            raise self._codec_error(key, why) from exc

    def _class_index(self, label: float, key: Any) -> int:
        if not is_class_index(label):
            raise DatasetError(
                f"{self.reader.name}: record {key!r} has label {label!r}, not a class index; "
                "for labels that are not whole numbers (regression, scores) pass "
                "RecordDataset(..., labels='float')"
            )
        return int(label)

    def _codec_error(self, key: Any, why: object) -> ImageCodecError:
        offset = self.reader.index.offset_of(key)
        message = (
            f"{self.reader.name}: the image of key {key!r} (byte {offset:,}) does not decode: {why}"
        )
        if isinstance(why, ImageTooLargeError):  # keeps its kind: a bomb is not damage
            return ImageTooLargeError(message, output=why.output)
        return ImageCodecError(message)

    def _decode(self, payload: bytes, key: Any) -> Any:
        try:
            upright = Upright(payload)  # as MXNet's ImageRecordIter and OpenCV's imread
            if self.min_size is not None:  # decoded at 1/2, 1/4 or 1/8 where min_size allows
                width, height = upright.size
                upright.draft("RGB", dct_scale(SCALARS, width, height, width, height,
                                               self.min_size))  # fmt: skip
            im = upright.load()
            rgb = im if im.mode == "RGB" else im.convert("RGB")
        except DECODE_ERRORS as exc:
            why = "not an image Pillow can read" if isinstance(exc, UnidentifiedImageError) else exc
            raise self._codec_error(key, why) from exc
        return np.asarray(rgb) if self.output == "numpy" else rgb

    def __repr__(self) -> str:
        return f"RecordDataset({self.reader.name!r}, {len(self)} records, layout={self.layout!r})"


#: this process's staging file (pid, fd): a batch's records from a store
_STAGE: list[tuple[int, int]] = []
#: the most a batch stages (64 MB: 64 records of 1 MB); the rest of its
#: records take the per-sample path, so an index of huge spans cannot make
#: a worker hold more
STAGE_LIMIT = 64 << 20


def _staged(reader: IndexedRecordReader, positions: np.ndarray) -> tuple[int, Any, Any] | None:
    """``(fd, starts, stops)`` as :meth:`IndexedRecordReader.spans` gives
    for a local file, for records that are not in one (a store, through its
    block cache): their bytes copied, framing and all, into an in-memory
    file of this process's, so the batch goes through the same C loop as a
    local file's. A span that is not one whole record (or past
    :data:`SPAN_LIMIT`, or :data:`STAGE_LIMIT` in all) is staged empty: the
    loop stops at it and the per-sample path reads it from the reader, as
    it would have; after :data:`SPAN_MISSES` such, there is no staging. None
    where there is no ``memfd_create`` (not Linux) or the offsets do not
    rise."""
    bounds = reader.span_bounds(positions) if hasattr(os, "memfd_create") else None
    if bounds is None:
        return None
    starts, stops = bounds
    pid = os.getpid()
    if not _STAGE or _STAGE[0][0] != pid:  # a forked worker makes its own
        _STAGE[:] = [(pid, os.memfd_create("im2rec-records", os.MFD_CLOEXEC))]
    fd = _STAGE[0][1]
    at, new_starts, new_stops = 0, np.empty_like(starts), np.empty_like(stops)
    for j, (start, stop) in enumerate(zip(starts.tolist(), stops.tolist(), strict=True)):
        data = reader.whole_span(start, stop) if at + stop - start <= STAGE_LIMIT else None
        data = data or b""
        os.pwrite(fd, data, at)
        new_starts[j], new_stops[j] = at, at + len(data)
        at += len(data)
    os.ftruncate(fd, at)  # the last batch's bytes beyond are not kept
    return fd, new_starts, new_stops
