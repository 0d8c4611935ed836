"""A ``.rec`` as a Hugging Face Hub dataset folder of Parquet shards, and
back: ``rec export --to parquet`` and ``rec import parquet``.

The folder is what ``datasets.load_dataset(FOLDER)`` loads with no script::

    FOLDER/README.md                                  the dataset card: features, splits, sizes
    FOLDER/data/{split}-{i:05d}-of-{n:05d}.parquet    shards of at most max_shard_bytes

Each row is one record, in file order: ``image`` (``{bytes, path}``, the
``Image`` feature; the bytes are the record's payload exactly), ``label``
(a ``ClassLabel`` named from the class map ``rec list`` wrote, or plain
int64, when every record holds one whole-number label; float32 when one
label is not whole; a list of float32 when a record holds several, as
multi-label and detection records do) and ``rec``, the record's header
(``flag``, ``id``, ``id2``) and its ``.idx`` key, so the import rebuilds
the same ``.rec``/``.idx`` byte for byte. The features are also in each
shard's schema (the ``huggingface`` metadata ``datasets`` writes).

Parquet is read and written by pyarrow (the ``parquet`` extra), a row
group at a time, so memory stays flat in the dataset's size.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DatasetError
from ..imaging.headers import image_extension
from ..listing.classmap import class_map_beside, classes_named, read_class_map
from ..progress import with_progress
from ..recordio import RecordReader, unpack
from ..recordio.header import is_class_index, is_whole
from ..recordio.sequential import sequential_records
from ..recordio.walking import header_at, walk_records
from ..storage import exists, sibling
from ..storage.atomic import write_file
from .arrow_columns import BinaryColumn, float_lists, numbers, strings
from .hubcard import DataFolder, card_text
from .wds_export import KeysByOffset

__all__ = ["ParquetExport", "arrow", "export_parquet"]

#: (records done, records in all, bytes written)
Progress = Callable[[int, int, int], None]
SHARD_BYTES = 500 << 20  # the Hub's own default shard size
ROW_GROUP_BYTES = (
    8 << 20
)  # (and at most ROW_GROUP_ROWS rows: the Hub writes image rows 100 a group)
ROW_GROUP_ROWS = 100
_SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def arrow() -> Any:
    """pyarrow and pyarrow.parquet, or a ConfigError saying how to get them."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            "Parquet needs pyarrow: pip install pyarrow (or the parquet extra)"
        ) from None
    return pa, pq


@dataclass
class ParquetExport:
    rec: str
    folder: str
    split: str
    shards: list[str] = field(default_factory=list)
    rows: int = 0
    bytes: int = 0
    label: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"rec": self.rec, "folder": self.folder, "split": self.split,
                "shards": self.shards, "rows": self.rows, "bytes": self.bytes,
                "label": self.label}  # fmt: skip


@dataclass
class _Labels:
    """How the records' labels become the ``label`` column."""

    kind: str  # "class", "int", "float" or "list"
    names: list[str] = field(default_factory=list)

    def fits(self, flag: int, value: float) -> bool:
        """Whether a record's label goes in this column as it is."""
        if self.kind == "list":
            return True
        if flag:
            return False
        if self.kind == "float":
            return True
        if self.kind == "class":
            return bool(is_class_index(value)) and value < len(self.names)
        return bool(is_whole(value))

    def feature(self) -> dict[str, Any]:
        if self.kind == "class":
            return {"names": self.names, "_type": "ClassLabel"}
        if self.kind == "list":
            return {"feature": {"dtype": "float32", "_type": "Value"}, "_type": "List"}
        return {"dtype": "int64" if self.kind == "int" else "float32", "_type": "Value"}


class _Wider(Exception):
    """A record whose label the column guessed from the first one cannot hold."""


def _heads(reader: RecordReader) -> Iterator[tuple[int, float]]:
    """``(flag, label)`` of every record's header, in file order (the label
    0.0 where ``flag`` counts several)."""
    buf, _ = reader.mapping()
    for head, nxt in walk_records(reader):  # type: ignore[misc]
        header = header_at(buf, head, nxt, reader.name)
        yield header.flag, 0.0 if header.flag else float(header.label)


def _guess(reader: RecordReader, class_map: str | None) -> _Labels:
    """The label column the first record suggests (no pass over the file):
    the export starts with it, and surveys every header only when a later
    record does not fit (:class:`_Wider`)."""
    return _column(itertools.islice(_heads(reader), 1), reader.name, class_map)


def _survey(reader: RecordReader, class_map: str | None) -> _Labels:
    """One pass over the headers: the label column every record fits."""
    return _column(_heads(reader), reader.name, class_map)


def _column(heads: Iterable[tuple[int, float]], rec: str, class_map: str | None) -> _Labels:
    """The label column ``(flag, label)`` pairs make: a list when a record
    holds several, float32 when a label is not a whole number, else classes
    (named from the class map) or plain int64."""
    whole, top = True, -1
    for flag, value in heads:
        if flag:
            return _Labels("list")
        if value.is_integer() and 0 <= value < 1 << 31:
            top = max(top, int(value))
        else:
            whole = False
    if not whole:
        return _Labels("float")
    path = class_map if class_map is not None else class_map_beside(rec)
    if path is None:
        return _Labels("int")
    classes = read_class_map(path)
    if top >= classes_named(len(classes)):  # (a list of names that long)
        raise DatasetError(
            f"{rec}: a record's label is {top:,}, and the class map {path} names "
            f"{len(classes):,} classes; give this rec's own map (--class-map)"
        )
    count = max(top + 1, max(classes, default=-1) + 1)
    return _Labels("class", [classes.get(i, str(i)) for i in range(count)])


def _schema(pa: Any, labels: _Labels) -> Any:
    label = {"list": pa.list_(pa.float32()), "float": pa.float32()}.get(labels.kind, pa.int64())
    features = {
        "image": {"_type": "Image"},
        "label": labels.feature(),
        "rec": {name: {"dtype": kind, "_type": "Value"} for name, kind in
                (("flag", "uint32"), ("id", "uint64"), ("id2", "uint64"), ("key", "uint64"))},
    }  # fmt: skip
    return pa.schema(
        [
            ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            ("label", label),
            (
                "rec",
                pa.struct(
                    [
                        ("flag", pa.uint32()),
                        ("id", pa.uint64()),
                        ("id2", pa.uint64()),
                        ("key", pa.uint64()),
                    ]
                ),
            ),  # fmt: skip
        ],
        metadata={"huggingface": json.dumps({"info": {"features": features}})},
    )


@with_progress("exporting", " records", done=0, total=1)
def export_parquet(
    rec: str | os.PathLike[str],
    folder: str | os.PathLike[str],
    *,
    split: str = "train",
    max_shard_bytes: int = SHARD_BYTES,
    class_map: str | None = None,
    overwrite: bool = False,
    on_progress: Progress | None = None,
    progress: bool = False,
) -> ParquetExport:
    """Write ``rec`` as split ``split`` of the dataset folder ``folder``
    (other splits already there are kept; the card lists them all)."""
    pa, pq = arrow()
    if not _SPLIT.fullmatch(split):
        raise ConfigError(f"split {split!r}: use letters, digits, '_', '.' and '-' (e.g. train)")
    if max_shard_bytes < 1:
        raise ConfigError("max_shard_bytes must be at least 1")
    reader = RecordReader(rec)
    data = DataFolder(folder)
    result = ParquetExport(reader.name, os.fspath(folder), split)
    idx = sibling(reader.location, ".idx")
    temps: list[str] = []
    try:
        # every shard there is read before anything is written: a foreign
        # or damaged one is found now, not after this split is published
        existing = data.shards()
        old = existing.pop(split, [])
        if old and not overwrite:
            raise DatasetError(
                f"{data.path / old[0]}: split {split!r} already exists; pass --overwrite"
            )
        others = {name: [data.info(shard) for shard in shards] for name, shards in existing.items()}
        labels = _guess(reader, class_map)
        while True:
            keys = KeysByOffset(idx if exists(idx) else None)
            result.rows = 0
            try:
                shards = _shards(reader, keys, labels, _schema(pa, labels), pa, max_shard_bytes,
                                 data, temps, pq, on_progress, result)  # fmt: skip
                for rows in shards:
                    result.rows += rows
                break
            except _Wider:  # the first record misled the guess: every header decides
                for temp in temps:
                    data.unlink(temp)
                temps.clear()
                wider = _survey(reader, class_map)
                if wider == labels:  # (cannot be: the survey saw the record that did not fit)
                    raise
                labels = wider
        result.label = labels.kind
        count = len(temps)
        finals = [f"{split}-{i:05d}-of-{count:05d}.parquet" for i in range(count)]
        mine = [data.info(temp) for temp in temps]
        for name, infos in others.items():
            if infos and mine and infos[0].features != mine[0].features:
                raise DatasetError(
                    f"{data.path / infos[0].name}: split {name!r} has other features than this "
                    f"one ({split!r}: labels {labels.kind}); a dataset's splits share one set of "
                    "features: export to another folder, or remove that split"
                )
        card = card_text({**others, split: mine})
        for temp, final in zip(temps, finals, strict=True):  # (published: nothing can fail now)
            data.replace(temp, final)
            result.shards.append(str(data.path / final))
        temps.clear()
        for name in old:
            if name not in finals:
                data.unlink(name)
        result.bytes = sum(info.size for info in mine)
        write_file(Path(folder) / "README.md", card)
    finally:
        reader.close()
        for temp in temps:
            data.unlink(temp)
        data.close()
    return result


def _shards(
    reader: RecordReader, keys: KeysByOffset, labels: _Labels, schema: Any, pa: Any,
    max_bytes: int, data: DataFolder, temps: list[str], pq: Any, on_progress: Progress | None,
    result: ParquetExport,
) -> Iterator[int]:  # fmt: skip
    """Write the shards (temporary names, in ``temps``); yields rows written."""
    writer: Any = None
    sink: Any = None  # (the shard's file: ParquetWriter.close() leaves a file it was given open)
    shard_bytes = 0
    columns: dict[str, list[Any]] = {k: [] for k in ("bytes", "path", "label", "flag", "id",
                                                     "id2", "key")}  # fmt: skip
    group_bytes = done = 0
    # each row group is written on a thread (pyarrow writes without the
    # GIL) while the next one's records are read
    pool = ThreadPoolExecutor(1, thread_name_prefix="im2rec-parquet")
    pending: Future[None] | None = None
    images = BinaryColumn(pa, 2 * ROW_GROUP_BYTES)

    def settle() -> None:
        nonlocal pending
        last = pending
        pending = None
        if last is not None:
            last.result()

    def flush() -> int:
        nonlocal group_bytes, pending
        n = len(columns["bytes"])
        if not n:
            return 0
        image = pa.StructArray.from_arrays(
            [images.array(columns["bytes"]), strings(pa, columns["path"])],
            names=["bytes", "path"],
        )
        rec = pa.StructArray.from_arrays(
            [numbers(pa, t, columns[k]) for k, t in (("flag", pa.uint32()), ("id", pa.uint64()),
                                                     ("id2", pa.uint64()), ("key", pa.uint64()))],
            names=["flag", "id", "id2", "key"],
        )  # fmt: skip
        kind = schema.field("label").type
        label = (float_lists(pa, columns["label"]) if labels.kind == "list"
                 else numbers(pa, kind, columns["label"]))  # fmt: skip
        table = pa.Table.from_arrays([image, label, rec], schema=schema)
        settle()
        pending = pool.submit(writer.write_table, table)
        for values in columns.values():
            values.clear()
        group_bytes = 0
        return n

    try:
        for head, payload in sequential_records(reader):
            if writer is None or shard_bytes >= max_bytes:
                if writer is not None:
                    yield flush()
                    settle()
                    writer.close()
                    sink.close()
                temp = f".{result.split}-{len(temps):05d}.{os.getpid()}.parquet.tmp"
                temps.append(temp)
                sink = _sink(pa, data.create(temp))
                writer = pq.ParquetWriter(sink, schema, **_ENCODING[labels.kind == "list"])
                shard_bytes = 0
            # (a view of the chunk read: pyarrow copies it once, into the column)
            header, image = unpack(payload)
            if not labels.fits(header.flag, 0.0 if header.flag else float(header.label)):
                raise _Wider
            columns["bytes"].append(image)
            columns["path"].append(f"{header.id}{image_extension(bytes(image[:16])) or '.bin'}")
            if labels.kind == "list":
                columns["label"].append(header.label.tolist() if header.flag
                                        else [float(header.label)])  # fmt: skip
            elif labels.kind == "float":
                columns["label"].append(float(header.label))
            else:
                columns["label"].append(int(header.label))
            columns["flag"].append(header.flag)
            columns["id"].append(header.id)
            columns["id2"].append(header.id2)
            columns["key"].append(keys.at(head))
            group_bytes += len(image) + 64
            shard_bytes += len(image) + 64
            done += 1
            if group_bytes >= ROW_GROUP_BYTES or len(columns["bytes"]) >= ROW_GROUP_ROWS:
                yield flush()
            if on_progress is not None:
                on_progress(done, keys.count, head)
        if writer is not None:
            yield flush()
            settle()
    finally:
        pool.shutdown(wait=True)  # (a row group being written when an error came: let it end)
        if writer is not None:
            writer.close()
            sink.close()


def _sink(pa: Any, fd: int) -> Any:
    """A file for the Parquet writer over ``fd``, which it takes: pyarrow's
    own, opened again through ``/proc/self/fd`` (that very file, whatever
    its name is now), so the writer thread writes without the GIL and does
    not wait for the main thread (docs/measured.md); a Python file where
    there is no ``/proc``."""
    proc = f"/proc/self/fd/{fd}"
    if not os.path.exists(proc):
        return os.fdopen(fd, "wb")
    try:
        return pa.OSFile(proc, "wb")
    finally:
        os.close(fd)


def _encoding(listed: bool) -> dict[str, Any]:
    """How the columns are stored: the images as they are (JPEG does not
    compress, and snappy would take six times as long as the write), the
    rest snappy with statistics."""
    small = ["image.path", "label.list.element" if listed else "label", "rec.flag", "rec.id",
             "rec.id2", "rec.key"]  # fmt: skip
    return {
        "compression": {"image.bytes": "none", **dict.fromkeys(small, "snappy")},
        "use_dictionary": small[1:],
        "write_statistics": small,
    }


_ENCODING = {listed: _encoding(listed) for listed in (False, True)}
