"""A ``.rec`` as a Hugging Face Hub dataset folder of Parquet shards, and
back: ``rec export --to parquet`` and ``rec import parquet``.

The folder is what ``datasets.load_dataset(FOLDER)`` loads with no script::

    FOLDER/README.md                                  the dataset card: features, splits, sizes
    FOLDER/data/{split}-{i:05d}-of-{n:05d}.parquet    shards of at most max_shard_bytes

Each row is one record, in file order: ``image`` (``{bytes, path}``, the
``Image`` feature; the bytes are the record's payload exactly), then the
label's columns, by the labels' kind (:mod:`.hublabels`: ``label`` a
``ClassLabel``, a number or a list; a detection rec's ``image_id``,
``width``, ``height`` and ``objects``), and when asked ``mxnet_label``
(the label as stored) and ``rec``, the record's header (``flag``, ``id``,
``id2``) and its ``.idx`` key, so the import rebuilds the same
``.rec``/``.idx`` byte for byte. The features are also in each shard's
schema (the ``huggingface`` metadata ``datasets`` writes).

Parquet is read and written by pyarrow (the ``parquet`` extra), a row
group at a time, so memory stays flat in the dataset's size.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DatasetError, EmptyRecError
from ..progress import with_progress
from ..recordio import RecordReader, unpack
from ..recordio.sequential import sequential_records
from ..recordio.walking import header_at, walk_records
from ..storage import exists, sibling
from ..storage.atomic import write_file
from ..storage.writeback import Writeback
from . import hublabels
from .hubcard import TASKS, Card, DataFolder, card_text, read_card
from .hublabels import guess, survey
from .hubrows import NotFitting, Rows
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


def _heads(reader: RecordReader) -> Iterator[tuple[int, Any]]:
    """``(flag, label)`` of every record's header, in file order."""
    buf, _ = reader.mapping()
    for head, nxt in walk_records(reader):  # type: ignore[misc]
        header = header_at(buf, head, nxt, reader.name)
        yield header.flag, header.label


@with_progress("exporting", " records", done=0, total=1)
def export_parquet(
    rec: str | os.PathLike[str],
    folder: str | os.PathLike[str],
    *,
    split: str = "train",
    max_shard_bytes: int = SHARD_BYTES,
    class_map: str | None = None,
    overwrite: bool = False,
    keep_header: bool = False,
    keep_mxnet_label: bool = False,
    card: Card | None = None,
    on_progress: Progress | None = None,
    progress: bool = False,
) -> ParquetExport:
    """Write ``rec`` as split ``split`` of the dataset folder ``folder``
    (other splits already there are kept; the card lists them all). The
    label columns follow the labels' kind (:mod:`.hublabels`);
    ``keep_header`` adds the ``rec`` column (each record's header and key:
    with it, ``rec import parquet`` gives back this ``.rec``/``.idx`` byte
    for byte) and ``keep_mxnet_label`` the ``mxnet_label`` column (the
    label as stored, beside a detection rec's ``objects``)."""
    pa, pq = arrow()
    if not _SPLIT.fullmatch(split):
        raise ConfigError(f"split {split!r}: use letters, digits, '_', '.' and '-' (e.g. train)")
    if max_shard_bytes < 1:
        raise ConfigError("max_shard_bytes must be at least 1")
    card = card or Card()
    if card.task is not None and card.task not in TASKS:
        raise ConfigError(f"task {card.task!r}: one of {', '.join(TASKS)}")
    previous = read_card(Path(folder) / "README.md")
    reader = RecordReader(rec)
    if not reader.size:  # (before the folder is made: nothing is written)
        reader.close()
        raise EmptyRecError(reader.name)
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
        labels = guess(_heads(reader), reader.name, class_map)
        while True:
            keys = KeysByOffset(idx if exists(idx) else None)
            result.rows = 0
            schema = hublabels.schema(pa, labels, keep_header=keep_header,
                                      keep_mxnet=keep_mxnet_label)  # fmt: skip
            rows = Rows(pa, labels, schema, keep_header=keep_header, keep_mxnet=keep_mxnet_label,
                        rec=reader.name, buffer=2 * ROW_GROUP_BYTES)  # fmt: skip
            try:
                for count in _shards(reader, keys, rows, pq, max_shard_bytes, data, temps,
                                     on_progress, result):  # fmt: skip
                    result.rows += count
                break
            except NotFitting:  # the first record misled the guess: every header decides
                for temp in temps:
                    data.unlink(temp)
                temps.clear()
                wider = survey(_heads(reader), reader.name, class_map)
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
                    "features (and the same --keep-header and --keep-mxnet-label): export to "
                    "another folder, or remove that split"
                )
        text = card_text({**others, split: mine}, card, labels.task(), previous)
        for temp, final in zip(temps, finals, strict=True):  # (published: nothing can fail now)
            data.replace(temp, final)
            result.shards.append(str(data.path / final))
        temps.clear()
        for name in old:
            if name not in finals:
                data.unlink(name)
        result.bytes = sum(info.size for info in mine)
        write_file(Path(folder) / "README.md", text)
    finally:
        reader.close()
        for temp in temps:
            data.unlink(temp)
        data.close()
    return result


def _shards(
    reader: RecordReader, keys: KeysByOffset, rows: Rows, pq: Any, max_bytes: int,
    data: DataFolder, temps: list[str], on_progress: Progress | None, result: ParquetExport,
) -> Iterator[int]:  # fmt: skip
    """Write the shards (temporary names, in ``temps``); yields rows written."""
    writer: Any = None
    sink: Any = None  # (the shard's file: ParquetWriter.close() leaves a file it was given open)
    writeback: Writeback | None = None  # (the shard's: it is on the disk soon after its last write)
    shard_bytes = done = 0
    # each row group is written on a thread (pyarrow writes without the
    # GIL) while the next one's records are read
    pool = ThreadPoolExecutor(1, thread_name_prefix="im2rec-parquet")
    pending: Future[None] | None = None
    pa = rows.pa

    def settle() -> None:
        nonlocal pending
        last = pending
        pending = None
        if last is not None:
            last.result()

    def flush() -> int:
        nonlocal pending
        n = len(rows)
        if not n:
            return 0
        table = rows.table()
        settle()
        pending = pool.submit(_write, writer, table, sink, writeback)
        return n

    try:
        for head, payload in sequential_records(reader):
            if writer is None or shard_bytes >= max_bytes:
                if writer is not None:
                    yield flush()
                    settle()
                    writer.close()
                    _close(sink, writeback)
                temp = f".{result.split}-{len(temps):05d}.{os.getpid()}.parquet.tmp"
                temps.append(temp)
                sink = _sink(pa, data.create(temp))
                writeback = Writeback(sink.fileno())
                writer = pq.ParquetWriter(sink, rows.schema, **_encoding(rows.schema))
                shard_bytes = 0
            # (a view of the chunk read: pyarrow copies it once, into the column)
            header, image = unpack(payload)
            rows.add(head, header, image, keys.at(head))
            shard_bytes += len(image) + 64
            done += 1
            if rows.bytes >= ROW_GROUP_BYTES or len(rows) >= ROW_GROUP_ROWS:
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
            _close(sink, writeback)


def _write(writer: Any, table: Any, sink: Any, writeback: Writeback | None) -> None:
    """Write a row group (on the writing thread), then ask for its writeback."""
    writer.write_table(table)
    if writeback is not None:
        writeback.written(sink.tell())


def _close(sink: Any, writeback: Writeback | None) -> None:
    if writeback is not None:
        writeback.close()
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


def _leaves(kind: Any, path: str) -> Iterator[str]:
    """The Parquet column paths under a field of arrow type ``kind``."""
    import pyarrow as pa

    if pa.types.is_struct(kind):
        for i in range(kind.num_fields):
            yield from _leaves(kind.field(i).type, f"{path}.{kind.field(i).name}")
    elif pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind):
        yield from _leaves(kind.value_type, f"{path}.list.element")
    else:
        yield path


def _encoding(schema: Any) -> dict[str, Any]:
    """How the columns are stored: the images as they are (JPEG does not
    compress, and snappy would take six times as long as the write), the
    rest snappy with statistics and dictionaries."""
    small = [leaf for f in schema for leaf in _leaves(f.type, f.name) if leaf != "image.bytes"]
    return {
        "compression": {"image.bytes": "none", **dict.fromkeys(small, "snappy")},
        "use_dictionary": [leaf for leaf in small if leaf != "image.path"],
        "write_statistics": small,
    }
