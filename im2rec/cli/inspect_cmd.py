"""``rec index``, ``rec verify`` and ``rec info``: looking inside a ``.rec``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..inspect.scanning import rebuild_index
from ..inspect.summary import summarise
from ..inspect.verifying import verify
from ..listing.classmap import class_map_beside, read_class_map
from ..storage import is_url, sibling
from .common import (
    DASH_REC,
    count_text,
    err_console,
    handle_errors,
    make_parent,
    out_console,
    progress_bar,
    size_text,
    spooled_input,
)

__all__ = ["index_command", "info_command", "verify_command"]

REC = DASH_REC  # `-`: the .rec comes on standard input


@click.command("index")
@click.argument("rec", type=REC)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="[default: REC with .idx; `-`: standard output]",
)
@click.option(
    "--keys",
    type=click.Choice(["seq", "id"]),
    default="seq",
    show_default=True,
    help="seq: 0..N-1 like rec2idx.py; id: each record's header id, as im2rec.py writes.",
)
@click.option(
    "--recover", is_flag=True, help="Skip damaged stretches and index the records around them."
)
def index_command(rec: str, output: str | None, keys: str, recover: bool) -> None:
    """Rebuild the .idx of a .rec by walking its records.

    \b
    Examples:
      rec index train.rec                 # train.idx, keys 0..N-1
      rec index train.rec --keys id       # keys = header ids, as im2rec.py
      rec index damaged.rec --recover -o damaged.idx
      cat train.rec | rec index - -o -   # from standard input to standard output
    """
    if rec == "-" and not output:
        raise click.UsageError("a .rec read from standard input needs -o (a file, or - for stdout)")
    target = output or sibling(rec, ".idx")
    with handle_errors(), spooled_input(rec) as path:
        index, damages = rebuild_index(path, keys="id" if keys == "id" else "seq", recover=recover)
        if output == "-":
            for piece in index.text_pieces():
                click.echo(piece, nl=False)
        else:
            make_parent(target)
            index.save(target)  # atomic; to a store, published whole
    for d in damages:
        err_console().print(f"skipped bytes {d.offset:,} to {d.end:,}: {d.reason}", markup=False)
    click.echo(
        f"{'standard output' if output == '-' else target}: "
        f"{count_text(len(index), 'record')} indexed"
        + (f", {len(damages)} damaged stretch(es) skipped" if damages else ""),
        err=output == "-",
    )


@click.command("verify")
@click.argument("rec", type=REC)
@click.option(
    "--idx",
    type=click.Path(exists=True, dir_okay=False),
    help="[default: REC with .idx, if present]",
)
@click.option("--decode", is_flag=True, help="Also decode every image.")
@click.option(
    "--boxes",
    is_flag=True,
    help="Also check that every label is a detection label MXNet reads, its corners in [0, 1] "
    "and no box empty.",
)
@click.option(
    "--manifest",
    type=click.Path(exists=True, dir_okay=False),
    help="A pack manifest (NAME.pack.json) whose SHA-256s must match.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def verify_command(
    rec: str, idx: str | None, decode: bool, boxes: bool, manifest: str | None, as_json: bool
) -> None:
    """Check a .rec: every frame, its .idx, optionally its images and manifest.

    Exits 0 only when everything holds; each problem is reported with its
    byte offset (and key when known).

    \b
    Examples:
      rec verify train.rec
      rec verify train.rec --decode --manifest train.pack.json --json
      rec verify voc_trainval.rec --boxes
    """
    with (
        handle_errors(writes=False),
        spooled_input(rec) as path,
        progress_bar(quiet=as_json) as bar,
    ):
        total = 0 if is_url(path) else Path(path).stat().st_size  # a URL's size comes later
        track = bar.track(rec.rsplit("/", 1)[-1], total=total, unit="bytes")
        result = verify(path, idx, decode=decode, boxes=boxes, manifest=manifest,
                        on_progress=lambda done, total: track(done, total, done))  # fmt: skip
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    else:
        for p in result.problems:  # click, not rich: verify is often run from scripts
            where = f"byte {p.offset:,}" if p.offset is not None else "file"
            key = f", key {p.key}" if p.key is not None else ""
            click.echo(f"{click.style('problem', fg='red')} at {where}{key}: {p.message}")
        status = "OK" if result.ok else count_text(len(result.problems), "problem")
        counts = f"{count_text(result.records, 'record')}, {size_text(result.bytes)}"
        click.echo(f"{result.path}: {counts}: {status}")
    if not result.ok:
        raise SystemExit(1)


@click.command("info")
@click.argument("rec", type=REC)
@click.option("--full", is_flag=True, help="Open every image, not a sample of 200.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
def info_command(rec: str, full: bool, as_json: bool) -> None:
    """Summarise a .rec: records, labels, ids, image formats and sizes, index.

    \b
    Examples:
      rec info train.rec
      rec info train.rec --full --json
    """
    with handle_errors(writes=False), spooled_input(rec) as path:
        info = summarise(path, sample=None if full else 200)
        found = None if rec == "-" or is_url(rec) else class_map_beside(rec)
        info["class_map"] = str(found) if found else None
        names = read_class_map(found) if found else None
    if as_json:
        click.echo(json.dumps(info, indent=1))
        return
    rows = info_rows(info, names, full)
    console = out_console()
    if not console.is_terminal:  # plain aligned text for pipes and logs
        width = max(len(key) for key, _ in rows)
        for key, value in rows:
            click.echo(f"{key:>{width}}  {value}")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    for key, value in rows:  # Text: a path with [brackets] is no markup
        table.add_row(Text(key, style="bold"), Text(value))
    console.print(table)


_SHOWN_LABELS = 10  # more distinct labels: their range and the most common


def info_rows(
    info: dict[str, Any], names: dict[int, str] | None, full: bool
) -> list[tuple[str, str]]:
    """``rec info``'s summary as (what, value) rows a person reads."""
    n = info["records"]
    split = (
        f", {info['split_records']:,} of them split across frames" if info["split_records"] else ""
    )
    size = info["bytes"]
    exact = f" ({size:,} bytes)" if size >= 1000 else ""
    rows = [("file", f"{info['path']}: {size_text(size)}{exact}")]
    rows.append(("records", f"{n:,}{split}"))
    if info["ids"] is not None:
        rows.append(("ids", f"{info['ids'][0]} to {info['ids'][1]}"))
    widths = info["label_width"]
    if "distinct" in widths:
        rows.append(("label_width", f"{widths['distinct']} different widths"))
    elif len(widths) == 1:
        ((width, _),) = widths.items()
        rows.append(("label_width", f"{width} (every record)"))
    elif widths:
        rows.append(("label_width", ", ".join(f"{w}: {c:,} records" for w, c in widths.items())))
    layout = info["layout"]
    if layout is not None:
        first, last = layout["identity_records"]
        rows.append(("layout", f"InsightFace: {layout['images']:,} images of "
                     f"{layout['identities']:,} identities (record 0 the header, {first:,} to "
                     f"{last:,} one per identity)"))  # fmt: skip
    elif info.get("detection"):
        rows.extend(_detection_rows(info["detection"], names))
    else:
        rows.append(("labels", _labels_text(info["labels"], names) if n else "none (no records)"))
    if info["class_map"]:
        rows.append(("class map", info["class_map"]))
    formats = ", ".join(f"{k} {v:,}" for k, v in info["formats"].items())
    sampled = f"all {info['images_sampled']:,}" if full else f"{info['images_sampled']:,} sampled"
    rows.append(("images", f"{formats} ({sampled})" if formats else "none"))
    if info["width"] is not None:
        w, h = info["width"], info["height"]
        rows.append(("size", f"{_span(w)} wide, {_span(h)} high (pixels)"))
    index = info["index"]
    if not index["exists"]:
        state = "none (rec index makes one)"
    elif index["agrees"]:
        state = f"{index['path']}, agrees with the records"
    else:
        state = f"{index['path']}, does NOT match the records: run rec verify, then rec index"
    rows.append(("index", state))
    return rows


def _detection_rows(found: dict[str, Any], names: dict[int, str] | None) -> list[tuple[str, str]]:
    """The detection labels' rows: objects, boxes per class, box sizes."""
    per = found["objects_per_image"]
    rows = [("labels", "detection: boxes, in the layout MXNet's ImageDetRecordIter reads")]
    if found["images"]:
        spread = f"{per['min']:,} to {per['max']:,} an image (mean {per['mean']:g})"
        rows.append(("objects", f"{found['objects']:,} in {found['images']:,} images, {spread}"))
    alone = found["images_without_objects"]
    if alone:
        rows.append(("no objects", f"{alone:,} image{'s' if alone > 1 else ''} labelled with the "
                     "header alone (rec list --keep-empty): RecordDataset reads them, MXNet's "
                     "ImageDetRecordIter refuses them"))  # fmt: skip
    classes = sorted(found["boxes_per_class"].items(), key=lambda kv: -kv[1])

    def named(key: str) -> str:
        return f"{key} {names[int(key)]}" if names and int(key) in names else key

    shown = ", ".join(f"{named(k)}: {v:,}" for k, v in classes[:_SHOWN_LABELS])
    more = f" (and {len(classes) - _SHOWN_LABELS:,} more classes)" if len(classes) > 10 else ""
    rows.append(("boxes/class", shown + more if classes else "none"))
    broken = found.get("not_detection", 0)
    if broken:
        rows.append(("broken", f"{broken:,} record{'s' if broken > 1 else ''} whose label is not "
                     "a detection label MXNet reads: rec verify --boxes names them"))  # fmt: skip
    if found["box_width"] is not None:
        (w0, w1, w2), (h0, h1, h2) = found["box_width"], found["box_height"]
        rows.append(("box size", f"{w0:g} to {w2:g} of the image's width (median {w1:g}), "
                     f"{h0:g} to {h2:g} of its height (median {h1:g})"))  # fmt: skip
    return rows


def _labels_text(labels: dict[str, int], names: dict[int, str] | None) -> str:
    if not labels:
        return "none single (only multi-label records)"
    if "distinct" in labels:
        return f"{labels['distinct']} distinct values"

    def named(key: str) -> str:
        value = float(key)
        if names and value.is_integer() and int(value) in names:
            return f"{key} {names[int(value)]}"
        return key

    if len(labels) <= _SHOWN_LABELS:
        return ", ".join(f"{named(k)}: {v:,}" for k, v in labels.items())
    common = sorted(labels.items(), key=lambda kv: -kv[1])[:3]
    keys = list(labels)
    return (
        f"{len(labels):,} distinct, {named(keys[0])} to {named(keys[-1])}; most records: "
        + ", ".join(f"{named(k)} ({v:,})" for k, v in common)
    )


def _span(bounds: list[int]) -> str:
    low, high = bounds
    return f"{low:,}" if low == high else f"{low:,} to {high:,}"
