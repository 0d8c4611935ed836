"""Hugging Face datasets both ways for every kind of label: a detection rec
exported as the Hub's ``objects`` layout (boxes in pixels of the stored
image) and a multi-label rec as a list of ``ClassLabel``, loaded by the
real ``datasets``; round trips byte-identical with ``--keep-header``, with
and without ``--keep-mxnet-label``; and tables shaped like datasets others
publish (CIFAR-10's ``img``, a ``cppe-5``-style detection table, a
multi-label table), in a Hub snapshot's and the Parquet conversion's
layouts, imported through the real ``rec`` command."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from im2rec.errors import DatasetError
from im2rec.formats.parquet import export_parquet
from im2rec.formats.parquet_import import import_parquet
from im2rec.listing import ListOptions, make_lists
from im2rec.listing.boxes import BoxOptions
from im2rec.packing import PackOptions, pack_list
from im2rec.recordio import IndexedRecordReader, IndexedRecordWriter, pack, unpack
from im2rec.recordio.detection import DetLabel

from ..boxsets import voc_set
from ..conftest import photo

datasets = pytest.importorskip("datasets")
pq = pytest.importorskip("pyarrow.parquet")
datasets.disable_progress_bars()
pytest.importorskip("tqdm").tqdm.monitor_interval = 0

CLASSES = ["cat", "dog", "person"]


def rec_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "im2rec", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


@pytest.fixture(scope="module")
def voc_rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A VOC set listed (an image without objects kept) and packed resized:
    the stored images are smaller than the annotation's, the header keeps
    the annotation's size."""
    tmp = tmp_path_factory.mktemp("voc")
    root = voc_set(tmp / "voc")
    make_lists(root, tmp / "voc", ListOptions(shuffle=False),
               boxes=BoxOptions("voc", keep_empty=True))  # fmt: skip
    pack_list(tmp / "voc.lst", PackOptions(pack_label=True, resize=32, quality=95), root=root)
    return tmp / "voc.rec"


def read_label(values: object) -> DetLabel:
    """A detection label split (a header alone too: an image without objects)."""
    array = np.asarray(values, np.float32)
    a, b = int(array[0]), int(array[1])
    return DetLabel(array[:a], array[a:].reshape(-1, b))


def records(rec: Path) -> list[tuple[object, bytes]]:
    reader = IndexedRecordReader(rec)
    return [unpack(reader.read_key(key)) for key in reader.keys]


def test_detection_exports_as_objects_in_pixels_of_the_stored_image(
    voc_rec: Path, tmp_path: Path
) -> None:
    done = rec_cli("export", str(voc_rec), "--to", "parquet", "-o", "hub", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["label"] == "detection"
    ds = datasets.load_dataset(str(tmp_path / "hub"), split="train")
    features = ds.features
    assert set(features) == {"image", "image_id", "width", "height", "objects"}
    assert features["objects"]["category"].feature.names == CLASSES
    assert features["objects"]["bbox"].feature.length == 4
    stored = records(voc_rec)
    assert len(ds) == len(stored) == 4
    seen_empty = False
    for row, (header, payload) in zip(ds, stored, strict=True):
        w, h = Image.open(io.BytesIO(payload)).size
        assert (row["width"], row["height"]) == (w, h) and min(w, h) == 32
        assert row["image"].size == (w, h) and row["image_id"] == header.id
        objects = read_label(header.label).objects
        seen_empty |= not len(objects)
        assert row["objects"]["category"] == objects[:, 0].astype(int).tolist()
        boxes = np.asarray(row["objects"]["bbox"], np.float64).reshape(-1, 4)
        want = objects[:, 1:5].astype(np.float64) * [w, h, w, h]
        assert np.array_equal(boxes[:, :2], want[:, :2])
        assert np.allclose(boxes[:, :2] + boxes[:, 2:], want[:, 2:], rtol=0, atol=1e-9)
        assert np.allclose(row["objects"]["area"], boxes[:, 2] * boxes[:, 3])
        assert row["objects"]["extra"] == objects[:, 5:].tolist()  # (VOC's difficult)
    assert seen_empty
    card = (tmp_path / "hub" / "README.md").read_text()
    assert "- object-detection" in card and "rec:" not in card


@pytest.mark.parametrize("mxnet", [False, True])
def test_detection_round_trip_is_byte_identical(voc_rec: Path, tmp_path: Path, mxnet: bool) -> None:
    result = export_parquet(voc_rec, tmp_path / "hub", keep_header=True, keep_mxnet_label=mxnet)
    names = pq.ParquetFile(result.shards[0]).schema_arrow.names
    assert ("mxnet_label" in names) == mxnet and "objects" in names
    back = import_parquet(result.shards, tmp_path / "back")
    assert back.columns["label" if mxnet else "objects"] == ("mxnet_label" if mxnet else "objects")
    assert (tmp_path / "back.rec").read_bytes() == voc_rec.read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == voc_rec.with_suffix(".idx").read_bytes()
    assert (tmp_path / "back.classes.tsv").read_text().split()[1::2] == CLASSES


def test_without_the_header_the_boxes_come_back_exactly(voc_rec: Path, tmp_path: Path) -> None:
    """No rec column: ids count from 0 and the header is GluonCV's with the
    stored image's size, but every object is the rec's, bit for bit."""
    result = export_parquet(voc_rec, tmp_path / "hub")
    import_parquet(result.shards, tmp_path / "back")
    for (mine, payload), (theirs, _) in zip(records(tmp_path / "back.rec"), records(voc_rec),
                                            strict=True):  # fmt: skip
        w, h = Image.open(io.BytesIO(payload)).size
        got, want = read_label(mine.label), read_label(theirs.label)
        assert got.header.tolist() == [4, 6, w, h]
        assert got.objects.tobytes() == want.objects.tobytes()


def test_multi_label_is_a_list_of_class_labels(tmp_path: Path) -> None:
    labels = [[0.0, 2.0], [1.0], 2.0, [0.0, 1.0, 2.0]]
    with IndexedRecordWriter(tmp_path / "m.rec") as w:
        for i, label in enumerate(labels):
            buf = io.BytesIO()
            photo(12, 10, i).save(buf, "JPEG")
            w.write_key(i * 3, pack((0, label, 100 + i, 0), buf.getvalue()))
    (tmp_path / "m.classes.tsv").write_text("0\tred\n1\tgreen\n2\tblue\n")
    result = export_parquet(tmp_path / "m.rec", tmp_path / "hub", keep_header=True)
    assert result.label == "multi"
    ds = datasets.load_dataset(str(tmp_path / "hub"), split="train")
    assert ds.features["label"].feature.names == ["red", "green", "blue"]
    assert ds["label"] == [[0, 2], [1], [2], [0, 1, 2]]
    import_parquet(result.shards, tmp_path / "back")
    assert (tmp_path / "back.rec").read_bytes() == (tmp_path / "m.rec").read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == (tmp_path / "m.idx").read_bytes()


def _jpeg(w: int, h: int, seed: int) -> bytes:
    buf = io.BytesIO()
    photo(w, h, seed).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _card(folder: Path, config: str, split_paths: dict[str, str]) -> None:
    files = "".join(f"  - split: {s}\n    path: {p}\n" for s, p in split_paths.items())
    (folder / "README.md").write_text(
        f"---\nconfigs:\n- config_name: {config}\n  data_files:\n{files}---\n# theirs\n"
    )


def test_cifar10_shaped_snapshot_imports_with_its_class_names(tmp_path: Path) -> None:
    """CIFAR-10's layout on the Hub: plain_text/train-00000-of-00001.parquet
    with columns img and label (ClassLabel), in a huggingface_hub snapshot
    folder whose files are links into its blob store."""
    names = ["airplane", "automobile", "bird"]
    features = datasets.Features({"img": datasets.Image(),
                                  "label": datasets.ClassLabel(names=names)})  # fmt: skip
    images = [_jpeg(8, 8, i) for i in range(6)]
    ds = datasets.Dataset.from_dict(
        {"img": [{"bytes": b, "path": None} for b in images], "label": [0, 2, 1, 1, 0, 2]},
        features=features,
    )
    blobs, snap = tmp_path / "blobs", tmp_path / "snapshots" / "abc123"
    blobs.mkdir()
    (snap / "plain_text").mkdir(parents=True)
    ds.to_parquet(str(blobs / "1f2e"))
    (snap / "plain_text" / "train-00000-of-00001.parquet").symlink_to(blobs / "1f2e")
    _card(snap, "plain_text", {"train": "plain_text/train-*"})
    done = rec_cli("import", "parquet", str(snap), "-o", "cifar", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["columns"] == {"image": "img", "label": "label"} and out["records"] == 6
    assert (tmp_path / "cifar.classes.tsv").read_text() == "0\tairplane\n1\tautomobile\n2\tbird\n"
    info = rec_cli("info", "cifar.rec", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert "0 airplane: 2, 1 automobile: 2, 2 bird: 2" in info.stdout
    got = records(tmp_path / "cifar.rec")
    assert [p for _, p in got] == images and [h.label for h, _ in got] == [0, 2, 1, 1, 0, 2]
    # a downloaded file named by its hash, as datasets' download cache keeps it
    raw = rec_cli("import", "parquet", str(blobs / "1f2e"), "-o", "raw", "-q", cwd=tmp_path)
    assert raw.returncode == 0, raw.stderr
    assert (tmp_path / "raw.rec").read_bytes() == (tmp_path / "cifar.rec").read_bytes()
    wrong = rec_cli("import", "parquet", str(snap), "-o", "x", "--image-column", "image",
                    cwd=tmp_path)  # fmt: skip
    assert wrong.returncode == 1 and "no column 'image' (--image-column); it has img, label" in (
        wrong.stderr
    )


def test_the_parquet_conversion_layout_and_named_columns(tmp_path: Path) -> None:
    """The Hub's Parquet conversion (CONFIG/SPLIT/0000.parquet, no card);
    columns named on the command line where the features do not say."""
    import pyarrow as pa

    (tmp_path / "conv" / "default" / "validation").mkdir(parents=True)
    images = [_jpeg(9, 7, i) for i in range(3)]
    table = pa.table({"picture": images, "klass": [3, 1, 4], "note": ["a", "b", "c"]})
    pq.write_table(table, tmp_path / "conv" / "default" / "validation" / "0000.parquet")
    done = rec_cli("import", "parquet", "conv", "--split", "validation", "-o", "v",
                   "--image-column", "picture", "--label-column", "klass", "-q", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [(h.label, p) for h, p in records(tmp_path / "v.rec")] == list(
        zip([3, 1, 4], images, strict=True)
    )
    assert not (tmp_path / "v.classes.tsv").exists()
    found = rec_cli("import", "parquet", "conv", "--split", "validation", "-o", "w", cwd=tmp_path)
    assert found.returncode == 1 and "no label column found (it has picture, klass, note)" in (
        found.stderr
    )


def _cppe5(tmp_path: Path, rows: list) -> Path:
    """A cppe-5-style table: image, image_id, width, height, objects
    {id, area, bbox [x, y, w, h] float32 pixels, category ClassLabel}."""
    features = datasets.Features({
        "image_id": datasets.Value("int64"), "image": datasets.Image(),
        "width": datasets.Value("int32"), "height": datasets.Value("int32"),
        "objects": datasets.Sequence({
            "id": datasets.Value("int64"), "area": datasets.Value("int64"),
            "bbox": datasets.Sequence(datasets.Value("float32"), length=4),
            "category": datasets.ClassLabel(names=["Coverall", "Face_Shield", "Gloves"]),
        }),
    })  # fmt: skip
    data: dict = {"image_id": [], "image": [], "width": [], "height": [], "objects": []}
    for i, (w, h, boxes) in enumerate(rows):
        data["image_id"].append(15 + i)
        data["image"].append({"bytes": _jpeg(w, h, i), "path": None})
        data["width"].append(w)
        data["height"].append(h)
        data["objects"].append({"id": list(range(len(boxes))), "area": [1] * len(boxes),
                                "bbox": [b[1:] for b in boxes],
                                "category": [b[0] for b in boxes]})  # fmt: skip
    path = tmp_path / "cppe" / "data" / "train-00000-of-00001.parquet"
    path.parent.mkdir(parents=True)
    datasets.Dataset.from_dict(data, features=features).to_parquet(str(path))
    return path


CPPE = [(40, 30, [(0, 4.0, 3.0, 20.0, 15.0), (2, 30.0, 10.5, 9.5, 19.5)]),
        (25, 50, [(1, 0.0, 0.0, 25.0, 50.0)]), (20, 20, [])]  # fmt: skip


def test_a_cppe5_shaped_detection_table_becomes_a_detection_rec(tmp_path: Path) -> None:
    _cppe5(tmp_path, CPPE)
    done = rec_cli("import", "parquet", "cppe", "-o", "ppe", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["columns"] == {"image": "image", "objects": "objects"}
    assert (tmp_path / "ppe.classes.tsv").read_text().split()[1::2] == [
        "Coverall", "Face_Shield", "Gloves"
    ]  # fmt: skip
    got = records(tmp_path / "ppe.rec")
    for (header, _), (w, h, boxes) in zip(got, CPPE, strict=True):
        label = read_label(header.label)
        assert label.header.tolist() == [4, 5, w, h]
        want = [[c, x / w, y / h, (x + bw) / w, (y + bh) / h] for c, x, y, bw, bh in boxes]
        assert np.array_equal(label.objects, np.asarray(want, np.float32).reshape(-1, 5))
    # (a row without objects is a header alone: MXNet's iterator refuses it,
    # and rec verify --boxes names it, as it does rec list --keep-empty's)
    verify = rec_cli("verify", "ppe.rec", "--boxes", cwd=tmp_path)
    assert verify.returncode == 1 and "key 2: label: 4 label values" in verify.stdout
    assert "1 problem" in verify.stdout
    from im2rec.training.dataset import RecordDataset
    from im2rec.training.detiter import ImageDetRecordIter

    ds = RecordDataset(tmp_path / "ppe.rec", output="bytes", labels="boxes")
    for k, (_, _, boxes) in enumerate(CPPE[:2]):
        _, target = ds[k]
        want = [[x, y, x + bw, y + bh] for _, x, y, bw, bh in boxes]
        assert np.allclose(np.asarray(target["boxes"]), want, atol=1e-4)
        assert np.asarray(target["labels"]).tolist() == [b[0] for b in boxes]
    # (MXNet's detection iterator refuses a label without objects: the two that have them)
    keep = tmp_path / "two.rec"
    with IndexedRecordWriter(keep) as w:
        for i, (header, payload) in enumerate(got[:2]):
            w.write_key(i, pack(header, payload))
    with ImageDetRecordIter(path_imgrec=str(keep), data_shape=(3, 16, 16), batch_size=2,
                            preprocess_threads=1, verbose=False) as it:  # fmt: skip
        batch = next(iter(it))
    rows = np.asarray(batch.label[0])
    assert rows.shape[0] == 2 and np.allclose(rows[0, 4:8], [4, 5, 40, 30])


def test_a_detection_table_with_a_bad_box_is_one_line(tmp_path: Path) -> None:
    _cppe5(tmp_path, [(40, 30, [(0, 4.0, 3.0, 20.0, 15.0)]), (20, 20, [(1, 100.0, 0, 5, 5)])])
    done = rec_cli("import", "parquet", "cppe", "-o", "bad", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "train-00000-of-00001.parquet: row 1: object 0's corners" in done.stderr
    assert not (tmp_path / "bad.rec").exists()


def test_a_multi_label_table_imports(tmp_path: Path) -> None:
    features = datasets.Features({"image": datasets.Image(),
                                  "tags": datasets.List(datasets.ClassLabel(names=["a", "b"]))})  # fmt: skip
    images = [_jpeg(6, 6, i) for i in range(3)]
    datasets.Dataset.from_dict(
        {"image": [{"bytes": b, "path": None} for b in images], "tags": [[0, 1], [1], [0]]},
        features=features,
    ).to_parquet(str(tmp_path / "tags.parquet"))
    result = import_parquet([str(tmp_path / "tags.parquet")], tmp_path / "t")
    assert result.columns == {"image": "image", "label": "tags"}
    got = [(h.flag, np.asarray(h.label).tolist()) for h, _ in records(tmp_path / "t.rec")]
    assert got == [(2, [0.0, 1.0]), (1, [1.0]), (1, [0.0])]
    with pytest.raises(DatasetError, match="already exists"):
        import_parquet([str(tmp_path / "tags.parquet")], tmp_path / "t")


def test_the_card_says_what_it_is_told(tmp_path: Path, voc_rec: Path) -> None:
    hub_card = pytest.importorskip("huggingface_hub")
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs

    (tmp_path / "about.md").write_text("# VOC, small\n\nFour photos with boxes.\n")
    done = rec_cli("export", str(voc_rec), "--to", "parquet", "-o", "hub", "--license",
                   "cc-by-4.0", "--pretty-name", "VOC small", "--description", "about.md",
                   "-q", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    card = hub_card.DatasetCard.load(tmp_path / "hub" / "README.md")
    data = card.data
    assert data.license == "cc-by-4.0" and data.pretty_name == "VOC small"
    assert data.task_categories == ["object-detection"] and data.size_categories == ["n<1K"]
    assert card.text.lstrip().startswith("# VOC, small") and "Four photos" in card.text
    infos = DatasetInfosDict.from_dataset_card_data(data)
    features = infos["default"].features
    assert features["objects"]["category"].feature.names == CLASSES
    assert infos["default"].splits["train"].num_examples == 4
    configs = MetadataConfigs.from_dataset_card_data(data)
    assert configs["default"]["data_files"] == [{"split": "train", "path": "data/train-*"}]
    # another split keeps what the card said
    again = rec_cli("export", str(voc_rec), "--to", "parquet", "-o", "hub", "--split", "test",
                    "-q", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    card = hub_card.DatasetCard.load(tmp_path / "hub" / "README.md")
    assert card.data.license == "cc-by-4.0" and "Four photos" in card.text
    assert len(MetadataConfigs.from_dataset_card_data(card.data)["default"]["data_files"]) == 2
    task = rec_cli("export", str(voc_rec), "--to", "parquet", "-o", "hub2", "--task",
                   "multi-label", "-q", cwd=tmp_path)  # fmt: skip
    assert task.returncode == 0, task.stderr
    data = hub_card.DatasetCard.load(tmp_path / "hub2" / "README.md").data
    assert data.task_ids == ["multi-label-image-classification"]


def _rec_of(path: Path, labels: list, payloads: list[bytes] | None = None) -> Path:
    with IndexedRecordWriter(path) as w:
        for i, label in enumerate(labels):
            payload = payloads[i] if payloads else _jpeg(10 + i, 8, i)
            w.write_key(7 * i + 1, pack((0, label, 1000 - i, i % 3), payload))
    return path


DET = [[4, 6, 10, 8, 1, 0.1, 0.2, 0.6, 0.7, 0, 0, 0.5, 0.5, 1, 1, 1], [4, 6, 11, 8],
       [2, 5, 2, 0.25, 0.125, 0.75, 0.875]]  # fmt: skip
KINDS = {
    "class": [0.0, 2.0, 1.0], "int": [5.0, 0.0, 9.0], "float": [0.5, 2.0, -1.25],
    "multi": [[0.0, 2.0], 1.0, [2.0, 1.0, 0.0]], "list": [[0.5, 2.0], 1.0, [3.0]],
    "detection": DET,
}  # fmt: skip


@pytest.mark.parametrize("keep_mxnet", [False, True])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_round_trips_with_the_header(
    tmp_path: Path, kind: str, keep_mxnet: bool
) -> None:
    rec = _rec_of(tmp_path / "k.rec", KINDS[kind])
    if kind in ("class", "multi", "detection"):
        (tmp_path / "k.classes.tsv").write_text("0\tred\n1\tgreen\n2\tblue\n")
    result = export_parquet(rec, tmp_path / "hub", keep_header=True, keep_mxnet_label=keep_mxnet)
    assert result.label == kind
    ds = datasets.load_dataset(str(tmp_path / "hub"), split="train")
    assert len(ds) == 3 and ("mxnet_label" in ds.features) == keep_mxnet
    import_parquet(result.shards, tmp_path / "back")
    assert (tmp_path / "back.rec").read_bytes() == rec.read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == rec.with_suffix(".idx").read_bytes()


def test_detection_as_a_list_of_structs_and_null_rows(tmp_path: Path) -> None:
    """datasets' List({...}) form (a list of structs), a row whose objects
    are null, and a box of integers: all read."""
    import pyarrow as pa

    objects = pa.array(
        [[{"bbox": [2, 4, 10, 4], "category": 1}], None, [{"bbox": [0, 0, 20, 8], "category": 0}]],
        pa.list_(pa.struct([("bbox", pa.list_(pa.int64())), ("category", pa.int64())])),
    )
    images = [_jpeg(20, 8, i) for i in range(3)]
    pq.write_table(pa.table({"image": images, "objects": objects}), tmp_path / "d.parquet")
    result = import_parquet([str(tmp_path / "d.parquet")], tmp_path / "d")
    assert result.columns == {"image": "image", "objects": "objects"} and result.classes is None
    got = [np.asarray(h.label).tolist() for h, _ in records(tmp_path / "d.rec")]
    want = [[4, 5, 20, 8, 1, 0.1, 0.5, 0.6, 1.0], [4, 5, 20, 8], [4, 5, 20, 8, 0, 0, 0, 1, 1]]
    assert got == [np.asarray(w, np.float32).tolist() for w in want]


@pytest.mark.parametrize(
    ("bbox", "category", "message"),
    [([[1.0, 2.0, 3.0]], [0], "a box is not four numbers"),
     ([[1.0, 2.0, 3.0, 4.0]], [1.5], "a category is not a class number"),
     ([[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]], [0], "row 0 has 2 boxes and 1 categories")],
)  # fmt: skip
def test_a_detection_column_that_is_not_one_is_named(
    tmp_path: Path, bbox: list, category: list, message: str
) -> None:
    import pyarrow as pa

    objects = pa.StructArray.from_arrays(
        [pa.array([bbox], pa.list_(pa.list_(pa.float64()))), pa.array([category])],
        names=["bbox", "category"],
    )
    pq.write_table(
        pa.table({"image": [_jpeg(8, 8, 0)], "objects": objects}), tmp_path / "d.parquet"
    )
    done = rec_cli("import", "parquet", "d.parquet", "-o", "d", cwd=tmp_path)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "d.rec").exists()


def test_class_names_a_map_cannot_carry_leave_it_out(tmp_path: Path) -> None:
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=["a\tb", "c"])})  # fmt: skip
    datasets.Dataset.from_dict({"image": [{"bytes": _jpeg(6, 6, 0), "path": None}], "label": [1]},
                               features=features).to_parquet(str(tmp_path / "t.parquet"))  # fmt: skip
    done = rec_cli("import", "parquet", "t.parquet", "-o", "t", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no class map written" in done.stderr and not (tmp_path / "t.classes.tsv").exists()
    assert [h.label for h, _ in records(tmp_path / "t.rec")] == [1.0]


def test_a_detection_image_of_unknown_size_needs_the_mxnet_label(tmp_path: Path) -> None:
    rec = _rec_of(tmp_path / "u.rec", DET[:1], [b"not an image at all"])
    with pytest.raises(DatasetError, match=r"id 1000\): its image's size cannot be read .* "
                       "--keep-mxnet-label"):  # fmt: skip
        export_parquet(rec, tmp_path / "hub")
    assert not list((tmp_path / "hub" / "data").iterdir())
    result = export_parquet(rec, tmp_path / "hub", keep_header=True, keep_mxnet_label=True)
    row = pq.read_table(result.shards[0]).to_pylist()[0]
    assert row["width"] is None and row["objects"] is None
    import_parquet(result.shards, tmp_path / "back")
    assert (tmp_path / "back.rec").read_bytes() == rec.read_bytes()


def test_detection_both_ways_never_imports_pandas(voc_rec: Path, tmp_path: Path) -> None:
    """pyarrow's compute helpers (fill_null, list_value_length, to_numpy)
    import pandas, a sixth of a second of each command's start-up: the
    columns are read and made from their buffers."""
    script = (
        "import sys\n"
        "from im2rec.formats.parquet import export_parquet\n"
        "from im2rec.formats.parquet_import import import_parquet\n"
        f"r = export_parquet({str(voc_rec)!r}, {str(tmp_path / 'hub')!r}, keep_header=True)\n"
        f"import_parquet(r.shards, {str(tmp_path / 'back')!r})\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
