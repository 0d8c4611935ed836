"""``rec convert`` (to InsightFace's layout), ``rec export`` and ``rec import``
(WebDataset tar shards)."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from ..errors import MissingFileError
from ..storage.prefetch import prefetch
from .common import (
    REC,
    count_text,
    err_console,
    handle_errors,
    make_parent,
    out_console,
    print_property,
    progress_bar,
    size_text,
)

__all__ = ["convert_command", "export_command", "import_command"]


@click.command("convert")
@click.argument("rec", type=REC)
@click.option(
    "--layout",
    type=click.Choice(["insightface"]),
    required=True,
    help="insightface: InsightFace's face layout (header record 0, images grouped by "
    "identity, one record per identity).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="OUT",
    help="Where to write: OUT.rec and OUT.idx (OUT may end in .rec).",
)
@click.option("--overwrite", is_flag=True, help="Replace OUT.rec/OUT.idx if they exist.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON on stdout.")
def convert_command(rec: str, layout: str, output: str, overwrite: bool, as_json: bool) -> None:
    """Rewrite a plain .rec in another layout.

    With --layout insightface, the records' labels are identities (a whole
    number, or the first of several labels); the images are grouped by
    identity, renumbered 1..N and labelled [identity, 1.0], and the header
    record 0 and one record per identity are added, as InsightFace's
    face2rec2.py writes them (what arcface_torch's MXFaceDataset reads).

    \b
    Examples:
      rec convert faces.rec --layout insightface -o train
      rec convert faces.rec --layout insightface -o train.rec --overwrite --json
    """
    from ..formats.insightface import convert_to_faces

    with handle_errors():
        make_parent(output)
        counts = convert_to_faces(rec, output, overwrite=overwrite)
    target = os.path.splitext(output)[0] if output.endswith(".rec") else output
    prop = str(counts.property) if counts.property else None
    if as_json:
        summary = {"rec": f"{target}.rec", "idx": f"{target}.idx", "layout": layout,
                   "images": counts.images, "identities": counts.identities,
                   "property": prop, "property_note": counts.property_note}  # fmt: skip
        click.echo(json.dumps(summary))
        return
    console = out_console()
    console.print(
        f"{rec} -> [bold]{target}.rec[/] + {target}.idx: {counts.images:,} images of "
        f"{counts.identities:,} identities (InsightFace layout)"
    )
    print_property(console, prop, counts.property_note)


@click.command("export")
@click.argument("rec", type=REC)
@click.option(
    "--to",
    "fmt",
    type=click.Choice(["webdataset", "parquet"]),
    required=True,
    help="The format to write: WebDataset tar shards, or a Hugging Face dataset folder of "
    "Parquet shards.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="OUT",
    help="webdataset: shard names with a number pattern, e.g. 'shards/train-%06d.tar' (a path "
    "or a URL); parquet: the dataset folder.",
)
@click.option(
    "--split",
    default="train",
    show_default=True,
    help="parquet: the split these records are (train, validation, test...).",
)
@click.option(
    "--class-map",
    type=click.Path(dir_okay=False),
    help="parquet: the class names (rec list's PREFIX.classes.tsv; by default the one beside "
    "the .rec).",
)
@click.option("--overwrite", is_flag=True, help="parquet: replace the split if it exists.")
@click.option(
    "--keep-header",
    is_flag=True,
    help="parquet: add the rec column (each record's header and .idx key), so `rec import "
    "parquet` gives back this very .rec/.idx.",
)
@click.option(
    "--keep-mxnet-label",
    is_flag=True,
    help="parquet: add the mxnet_label column (each label as stored), beside a detection "
    "rec's objects.",
)
@click.option("--license", "license_", metavar="ID", help="parquet: the card's license (e.g. mit).")
@click.option(
    "--task",
    type=click.Choice(["classification", "multi-label", "object-detection"]),
    help="parquet: the card's task [default: from the labels].",
)
@click.option("--pretty-name", metavar="NAME", help="parquet: the card's name for the dataset.")
@click.option(
    "--description",
    type=click.Path(dir_okay=False, exists=True),
    help="parquet: a Markdown file, the card's text.",
)
@click.option(
    "--maxcount",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Samples per shard at most.",
)
@click.option(
    "--maxsize",
    type=click.IntRange(min=1),
    help="Bytes per shard at most (webdataset: 3,000,000,000, a larger sample gets a shard "
    "of its own; parquet: 500 MiB).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
def export_command(
    rec: str, fmt: str, output: str, split: str, class_map: str | None, overwrite: bool,
    keep_header: bool, keep_mxnet_label: bool, license_: str | None, task: str | None,
    pretty_name: str | None, description: str | None, maxcount: int, maxsize: int | None,
    as_json: bool, quiet: bool,
) -> None:  # fmt: skip
    """Write a .rec as WebDataset tar shards, or as a split of a Hugging
    Face dataset folder.

    webdataset: one sample per record, in file order: the image bytes
    unchanged under the extension of their format (KEY.jpg, .png, ...),
    KEY.cls with the label when it is one whole number, and KEY.json with
    the whole header (flag, label, id, id2) and the .idx key, so `rec import
    webdataset` rebuilds the same .rec/.idx byte for byte. KEY is the record
    id. The shards appear together when the last is complete.

    parquet: OUT/data/SPLIT-NNNNN-of-NNNNN.parquet shards and the dataset
    card OUT/README.md, which datasets.load_dataset(OUT) loads with no
    script: an image column (the record's bytes unchanged) and the labels
    by kind: a label column (ClassLabel with the class map's names, a
    number, or a list: multi-label as a list of ClassLabel), or for
    detection image_id, width, height and objects (bbox in pixels as
    COCO's [x, y, width, height], category, id, area). With --keep-header,
    `rec import parquet` rebuilds the very .rec/.idx. Export each split in
    turn into one folder.

    \b
    Examples:
      rec export train.rec --to webdataset -o 'shards/train-%06d.tar'
      rec export train.rec --to webdataset -o 's3://b/wds/train-%06d.tar'
      rec export example_train.rec --to parquet -o mydataset --split train
      rec export example_val.rec --to parquet -o mydataset --split validation
      rec export cats.rec --to parquet -o catboxes --license cc-by-4.0
    """
    prefetch([rec])  # (read while the format's modules load)
    with handle_errors(), progress_bar(quiet=quiet or as_json) as bar:
        track = bar.track(os.path.basename(rec), total=0, unit="records")
        if fmt == "parquet":
            from ..formats.hubcard import Card
            from ..formats.parquet import SHARD_BYTES, export_parquet

            card = Card(license_, task, pretty_name, _text(description))
            exported = export_parquet(
                rec, output, split=split, max_shard_bytes=maxsize or SHARD_BYTES,
                class_map=class_map, overwrite=overwrite, keep_header=keep_header,
                keep_mxnet_label=keep_mxnet_label, card=card, on_progress=track,
            )  # fmt: skip
        else:
            from ..formats.wds_export import export_webdataset

            result = export_webdataset(rec, output, maxcount=maxcount,
                                       maxsize=maxsize or 3_000_000_000,
                                       on_progress=track)  # fmt: skip
    if fmt == "parquet":
        _say(exported, as_json, quiet,
             f"{rec} -> [bold]{output}[/], split {split}: {len(exported.shards)} Parquet "
             f"shard(s), {count_text(exported.rows, 'row')}, {size_text(exported.bytes)} "
             f"(labels: {exported.label})")  # fmt: skip
        return
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    elif not quiet:
        first = result.shards[0] if result.shards else output
        out_console().print(
            f"{rec} -> [bold]{len(result.shards)} {fmt} shard(s)[/] ({first} ...): "
            f"{count_text(result.samples, 'sample')}, {size_text(result.bytes)}",
            markup=True,
        )


@click.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(["webdataset", "parquet"]))
@click.argument("shards", nargs=-1, required=True, metavar="SOURCE...")
@click.option(
    "-o", "--output", required=True, metavar="PREFIX", help="Write PREFIX.rec and PREFIX.idx."
)
@click.option(
    "--label-key",
    metavar="FIELD",
    help="Take each label from this field of the sample's .json (a number or a list of "
    "numbers) instead of its .cls.",
)
@click.option(
    "--split",
    default="train",
    show_default=True,
    help="parquet: the split to import from a dataset folder.",
)
@click.option("--config", metavar="NAME", help="parquet: the dataset folder's config to import.")
@click.option("--image-column", metavar="NAME", help="parquet: the image column [default: found].")
@click.option("--label-column", metavar="NAME", help="parquet: the label column [default: found].")
@click.option(
    "--objects-column",
    metavar="NAME",
    help="parquet: a detection column (bbox in pixels, category) [default: found].",
)
@click.option("--overwrite", is_flag=True, help="Replace PREFIX.rec/.idx if they exist.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
def import_command(
    fmt: str,
    shards: tuple[str, ...],
    output: str,
    label_key: str | None,
    split: str,
    config: str | None,
    image_column: str | None,
    label_column: str | None,
    objects_column: str | None,
    overwrite: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Build a .rec/.idx from WebDataset tar shards or Parquet files.

    webdataset: SOURCE may be a path, a shell glob ('shards/*.tar') or
    WebDataset's brace notation ('train-{000000..000009}.tar'). Shards
    written by `rec export` give back the very .rec/.idx they came from.
    From other shards, each sample's image (its first image field) and
    label (.cls, or the .json field named by --label-key) make a record,
    ids counted from 0; samples without either are skipped and listed in
    PREFIX.import-skipped.tsv.

    parquet: SOURCE is a dataset folder (the split's files as its card's
    configs or the Hub's naming say: --split, --config) or Parquet files
    (globs allowed). The image column and the labels are found from the
    features (the first Image; a ClassLabel or list of them; a detection
    column of bbox and category, which becomes detection labels), or named.
    ClassLabel names become PREFIX.classes.tsv. A folder `rec export --to
    parquet --keep-header` wrote gives back the very .rec/.idx; other rows
    get ids counted from 0.

    \b
    Examples:
      rec import webdataset 'shards/train-{000000..000009}.tar' -o train
      rec import webdataset shards/*.tar -o train --label-key class_id
      rec import parquet mydataset --split validation -o val
      rec import parquet cifar10 --config plain_text -o cifar_train
    """
    from ..formats.shards import expand_shards

    with handle_errors(), progress_bar(quiet=quiet or as_json) as bar:
        make_parent(output)
        try:
            names = _parquet_sources(shards, split, config) if fmt == "parquet" else \
                expand_shards(list(shards))  # fmt: skip
        except MissingFileError as exc:  # a shard named on the command line: a usage mistake
            raise click.UsageError(str(exc)) from None
        prefetch(names)  # (read while the format's modules load)
        if fmt == "parquet":
            from ..formats.parquet_import import import_parquet

            track = bar.track(f"{len(names)} file(s)", total=0, unit="records")
            imported = import_parquet(names, output, overwrite=overwrite,
                                      image_column=image_column, label_column=label_column,
                                      objects_column=objects_column, on_progress=track)  # fmt: skip
        else:
            from ..formats.wds_import import import_webdataset

            track = bar.track(f"{len(names)} shard(s)", total=0, unit="records")
            result = import_webdataset(names, output, label_key=label_key, overwrite=overwrite,
                                       on_progress=track)  # fmt: skip
    if fmt == "parquet":
        classes = f" + {imported.classes}" if imported.classes else ""
        _say(imported, as_json, quiet,
             f"{len(names)} Parquet file(s) -> [bold]{imported.rec}[/] + {imported.idx}{classes}: "
             f"{count_text(imported.records, 'record')} (columns: "
             f"{', '.join(imported.columns.values())})")  # fmt: skip
        if imported.classes_note:
            err_console().print(f"[yellow]{imported.classes_note}[/]")
        return
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
        return
    if not quiet:
        out_console().print(
            f"{len(names)} {fmt} shard(s) -> [bold]{result.rec}[/] + {result.idx}: "
            f"{count_text(result.records, 'record')}",
            markup=True,
        )
    if result.skipped:
        reasons = ", ".join(f"{n:,} {why}" for why, n in result.skipped.most_common())
        err_console().print(
            f"[yellow]{sum(result.skipped.values()):,} sample(s) skipped ({reasons}); "
            f"listed in {result.report}[/]"
        )


def _say(result: Any, as_json: bool, quiet: bool, text: str) -> None:
    """A command's result: as JSON on stdout, or ``text``, or nothing."""
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    elif not quiet:
        out_console().print(text, markup=True)


def _text(path: str | None) -> str | None:
    """The text of the file at ``path`` (UTF-8; at most 1 MiB), or None."""
    if path is None:
        return None
    from ..errors import DatasetError

    with open(path, "rb") as f:
        data = f.read((1 << 20) + 1)
    if len(data) > 1 << 20:
        raise DatasetError(f"{path}: a description of more than 1 MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start:,})") from None


def _parquet_sources(sources: tuple[str, ...], split: str, config: str | None) -> list[str]:
    """The Parquet files ``rec import parquet`` reads: a dataset folder's
    files of ``split``, or the files (and globs) given, in order."""
    from ..formats.hubfolders import dataset_files
    from ..formats.shards import expand_shards

    names: list[str] = []
    for source in sources:
        if os.path.isdir(source):
            names += [str(p) for p in dataset_files(source, split, config)]
        else:
            names += expand_shards([source])
    return names
