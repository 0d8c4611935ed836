"""The README and the docs run as printed: their commands and snippets are
executed, with processes started by fork and by spawn, every ``rec``
command line they show names real options, the generated reference
matches the commands, and the site builds strict. So the documentation
cannot drift from the code."""

from __future__ import annotations

import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

# (processes, servers or seconds: `make test-fast` leaves them out)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _section(page: str, title: str, next_title: str | None) -> str:
    text = (ROOT / page).read_text()
    start = text.index(f"\n## {title}\n")
    return text[start : text.index(f"\n## {next_title}\n") if next_title else len(text)]


#: how the docs' examples are run: as printed (processes started as the
#: platform starts them: fork on Linux), and with every process started by
#: spawn (macOS', Windows' and Python 3.14's Linux default), under which a
#: DataLoader worker imports the script again and pickles what it is given
START_METHODS = ["fork", "spawn"]


#: a warning of CPython's resource tracker (``multiprocessing/resource_tracker.py``)
_TRACKER = re.compile(
    r"\S*resource_tracker\.py:\d+: UserWarning: resource_tracker: (.*)\n"
    r"\s+warnings\.warn\(.*\n"
)
_GONE = re.compile(r"'/mp-\w+': \[Errno 2\] No such file or directory")


def _without_tracker_race(stderr: str) -> str:
    """``stderr`` without the resource tracker's race at the exit of a
    script whose DataLoader ran under spawn: it counts a semaphore of the
    DataLoader's queues (made and unlinked by the script itself; im2rec
    makes none) as leaked, then finds it already gone (ENOENT). Only when
    each one it counts is one it found gone: a semaphore still there to be
    removed is a real leak, and stays in ``stderr``."""
    found = _TRACKER.findall(stderr)
    gone = sum(bool(_GONE.fullmatch(what)) for what in found)
    counted = [re.match(r"There appear to be (\d+) leaked semaphore", what) for what in found]
    leaked = sum(int(m.group(1)) for m in counted if m)
    if not gone or gone != leaked or gone + sum(map(bool, counted)) != len(found):
        return stderr
    return _TRACKER.sub("", stderr)


def _run_blocks(section: str, cwd: Path, start: str = "fork", only: str | None = None) -> str:
    """Every block of ``section``, in order, in ``cwd``: ``sh`` blocks run
    with bash (any failing command fails the test), a ``text`` block
    starting with ``$ `` is a command whose output must be exactly what
    follows it, ``python`` blocks run as scripts, their processes started
    by ``start`` (``only``: the blocks of that language alone). Returns
    what they printed."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if start == "spawn":  # (a sitecustomize sets the start method before the script runs)
        site = cwd / ".spawn-site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(
            "import multiprocessing\nmultiprocessing.set_start_method('spawn', force=True)\n"
        )
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    blocks = re.findall(r"```(sh|text|python)\n(.*?)```", section, re.S)
    blocks = [(lang, body) for lang, body in blocks if only in (None, lang)]
    tmp_path = cwd
    printed = []
    for lang, body in blocks:
        if lang == "sh":
            done = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            assert done.returncode == 0, body + done.stdout + done.stderr
        elif lang == "text":
            command, _, expected = body.partition("\n")
            assert command.startswith("$ "), command
            done = subprocess.run(["bash", "-c", command[2:]], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
            assert done.stdout == expected, done.stdout
        else:
            (tmp_path / "snippet.py").write_text(body)
            done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            assert done.returncode == 0, body + done.stderr
            said = _without_tracker_race(done.stderr)
            assert said == "", body + done.stderr  # a snippet as printed says no more
        printed.append(done.stdout)
    return "".join(printed)


@pytest.mark.parametrize("start", START_METHODS)
def test_the_library_page_runs_as_printed(tmp_path: Path, start: str) -> None:
    """docs/library.md, every block in order as printed (its snippets once
    stopped on names they did not define): the drop-in, the modern API,
    listing and packing a copy of examples/example, a training loop on
    ImageRecordIter and a DataLoader over RecordDataset."""
    pytest.importorskip("torch")
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    out = _run_blocks((ROOT / "docs/library.md").read_text(), tmp_path, start)
    assert "(30, 40, 3) 3.0" in out  # the drop-in: BGR, as OpenCV
    assert "50 [0, 1, 2]" in out and "42 50" in out  # the modern API
    assert sorted(int(line.split()[0]) for line in out.splitlines() if ".rec" in line) == [2, 13]
    assert "epoch 1 loss" in out and "(16, 3, 224, 224) torch.int64" in out


@pytest.mark.parametrize("start", START_METHODS)
def test_getting_started_runs_as_printed(tmp_path: Path, start: str) -> None:
    """docs/getting-started.md from its first dataset on, in one folder that
    holds a copy of examples/example."""
    pytest.importorskip("torch")
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    section = _section("docs/getting-started.md", "Your first dataset", None)
    assert section.count("```sh\n") >= 4
    out = _run_blocks(section, tmp_path, start)
    assert "torch.Size([4, 3, 64, 64]) torch.float32" in out  # the DataLoader's batches
    assert "(4, 3, 64, 64)" in out  # ImageRecordIter's
    assert "refused: exit 1" in out  # a finished output made otherwise needs --overwrite
    for name in ("example_train.rec", "example_val.rec", "example_rec.rec", "mydata.rec"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert (tmp_path / "sheet.png").exists()


@pytest.mark.parametrize("start", START_METHODS)
def test_the_detection_page_runs_as_printed(tmp_path: Path, start: str) -> None:
    """docs/detection.md on a VOC, a COCO and a YOLO set made here, at the
    paths the page names."""
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from tests.boxsets import coco_set, voc_set, yolo_set

    voc_set(tmp_path / "VOCdevkit" / "VOC2007", sets={"trainval": ["a", "b", "d"]})
    coco = coco_set(tmp_path / "made")
    (tmp_path / "coco" / "annotations").mkdir(parents=True)
    (coco / "images").rename(tmp_path / "coco" / "val2017")
    (coco / "instances.json").rename(tmp_path / "coco/annotations/instances_val2017.json")
    yolo_set(tmp_path / "mydata")
    out = _run_blocks((ROOT / "docs/detection.md").read_text(), tmp_path, start)
    assert "[ 0. 30. 40. 60.]]" in out  # image d's third box, back in pixels of its image
    assert "torch.int64" in out and "(3, 4)" in out  # the DataLoader's targets
    # a torchvision detector's training step, on boxes transforms.v2 moved
    assert "['loss_box_reg', 'loss_classifier', 'loss_objectness', 'loss_rpn_box_reg'] True" in out
    # ImageDetRecordIter: rows 4 + (4 + 3 objects x 6), and SSD's objects view
    assert "(3, 3, 300, 300) (3, 26) (3, 3, 6)" in out
    assert "(3, 3, 300, 300) [[" in out  # the DataLoader of DetTransform samples
    for name in ("voc_trainval", "coco_val", "mydata"):
        assert len((tmp_path / f"{name}.lst").read_text().splitlines()) == 3, name
        assert (tmp_path / f"{name}.rec").stat().st_size > 0, name


@pytest.mark.parametrize("start", START_METHODS)
def test_the_hugging_face_page_runs_as_printed(tmp_path: Path, start: str) -> None:
    """docs/huggingface.md on a copy of examples/example: two splits
    exported, loaded by the real datasets, one imported back identical."""
    pytest.importorskip("datasets")
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    out = _run_blocks((ROOT / "docs/huggingface.md").read_text(), tmp_path, start)
    assert "['train', 'validation'] ['birds', 'cats', 'dogs']" in out
    assert "identical" in out
    # detection as objects (a box in pixels, half the image), multi-label
    # as lists of class names, and the folder streamed back
    assert "['cat']\n192 136 [[48.0, 34.0, 96.0, 68.0]] [0]" in out
    assert "['birds', 'cats', 'dogs'] [" in out
    assert "['height', 'image', 'image_id', 'objects', 'rec', 'width'] [0]" in out
    assert "cats_back.rec: 5 records" in out


@pytest.mark.parametrize("start", START_METHODS)
def test_the_resuming_page_runs_as_printed(tmp_path: Path, start: str) -> None:
    """docs/resuming.md on a copy of examples/example: a StatefulDataLoader
    checkpointed in one process and resumed in another, ImageRecordIter's
    state, an elastic merge, a mixture in proportions."""
    pytest.importorskip("torchdata.stateful_dataloader")
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    out = _run_blocks((ROOT / "docs/resuming.md").read_text(), tmp_path, start)
    # 12 training images, 3 steps of 2 taken: 6 left; 4 batches of 3, 1 taken
    assert "resumed with 6 samples left" in out and "batches left: 3" in out
    assert "left for the 3 ranks: [3, 3, 2]" in out  # 12 - 4 trained on, shared out
    assert "from the second source: 3 of 10" in out


@pytest.mark.parametrize("start", START_METHODS)
def test_the_readme_start_runs_as_printed(tmp_path: Path, start: str) -> None:
    """The README's two-command start, its look inside, and its DataLoader
    loop; then its library snippet."""
    pytest.importorskip("torch")
    shutil.copytree(ROOT / "examples" / "example", tmp_path / "example")
    section = _section("README.md", "Your images to a `.rec` in two commands", "The commands")
    out = _run_blocks(section, tmp_path, start)
    assert "torch.Size([4, 3, 64, 64]) torch.float32" in out
    assert (tmp_path / "example_train.rec").stat().st_size > 0 and (tmp_path / "sheet.png").exists()
    library = _section("README.md", "The library", "When something goes wrong")
    _run_blocks(library, tmp_path, start)  # (as printed: the names it uses, it defines)
    assert (tmp_path / "train.idx").read_text().startswith("0\t0\n")


def test_the_readme_stays_short() -> None:
    """The README says what im2rec is, how to install and start, one line a
    command, what to do when something goes wrong; the rest is in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def _command_lines() -> list[tuple[str, list[str]]]:
    """Every ``rec ...`` command line in a shell block of the README and docs."""
    found = []
    for page in DOCS:
        for block in re.findall(r"```(?:sh|bash|console)\n(.*?)```", page.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #", 1)[0].strip().removeprefix("$ ")
                for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
                    if part.startswith("rec "):
                        found.append((page.name, shlex.split(part)[1:]))
    return found


def test_every_command_line_shown_uses_real_options() -> None:
    """A command or option renamed in the code and not in the docs fails here."""
    import click

    from im2rec.cli import main

    lines = _command_lines()
    assert len(lines) > 40  # (the walk works)
    ctx = click.Context(main)
    for page, args in lines:
        if not args or args[0].startswith("-"):
            continue
        command = main.get_command(ctx, args[0])
        assert command is not None, f"{page}: rec {args[0]} is not a command"
        known = {opt for param in command.params for opt in param.opts + param.secondary_opts}
        known |= {"-h", "--help"}
        for arg in args[1:]:
            name = arg.split("=", 1)[0]
            if name.startswith("-") and name != "-":
                assert name in known, f"{page}: rec {args[0]} has no option {name}"


def test_the_im2rec_reference_is_its_help() -> None:
    from im2rec.cli.im2rec_compat import _parser

    os.environ["COLUMNS"] = "80"  # argparse wraps to the terminal; the page was made at 80
    try:
        expected = _parser().format_help()
    finally:
        del os.environ["COLUMNS"]
    page = (ROOT / "docs" / "cli.md").read_text()
    assert f"```text\n{expected}```" in page


def test_every_python_block_in_the_docs_compiles() -> None:
    blocks = [
        (p.name, b) for p in DOCS for b in re.findall(r"```python\n(.*?)```", p.read_text(), re.S)
    ]
    assert len(blocks) > 10
    for page, block in blocks:
        compile(block, page, "exec")


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """The whole site, built by Zensical as `make docs` builds it in CI:
    a broken link, anchor or reference fails; the command reference says
    what the commands do and the API reference documents every public
    name."""
    zensical = Path(sys.executable).parent / "zensical"
    if not zensical.exists():
        pytest.skip("the docs extra (zensical) is not installed")
    # (a copy of what the site is made of, built there: Zensical takes no output folder)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "griffe_roles.py", tmp_path / "scripts")
    done = subprocess.run([str(zensical), "build", "--strict"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No issues found" in done.stdout + done.stderr
    site = tmp_path / "build" / "site"
    check_the_command_reference((site / "cli" / "index.html").read_text())
    check_the_api_reference((site / "api" / "index.html").read_text())
    for page in site.rglob("*.html"):  # renders the same offline
        assert "fonts.googleapis.com" not in page.read_text(), page


def test_the_command_reference_is_what_the_commands_print() -> None:
    """docs/cli.md is committed (a change to a command's help shows in
    review) and is exactly what scripts/docs_cli.py writes from --help:
    `-h` shown, every line within the code box, no machine's CPU count."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import docs_cli
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    text = (ROOT / "docs" / "cli.md").read_text()
    assert docs_cli.page(text) == text, "run scripts/docs_cli.py and commit docs/cli.md"
    assert max(len(line) for line in text.splitlines() if not line.startswith("<!--")) <= 79
    assert text.count("-h, --help") == text.count("## `rec") + 1  # rec, every command, im2rec
    assert "worker processes (default: the number of CPUs)" in text
    assert f"(default: {os.cpu_count()})" not in text


#: the modules whose ``__all__`` is the public API the reference documents
PUBLIC = ["im2rec", "im2rec.recordio", "im2rec.recordio.detection", "im2rec.training",
          "im2rec.listing", "im2rec.errors", "im2rec.recordio.codec",
          "im2rec.recordio.walking"]  # fmt: skip


def check_the_api_reference(html: str) -> None:
    """Every public name is documented (under its own path, or the path it
    is re-exported from), and no Sphinx role is left as written: each is a
    link, or code."""
    import importlib

    ids = set(re.findall(r'id="(im2rec[\w.]*)"', html))
    modules = {name: importlib.import_module(name) for name in PUBLIC}
    missing = []
    for name, module in modules.items():
        for member in module.__all__:
            obj = getattr(module, member)
            if member == "__version__" or inspect.ismodule(obj):
                continue
            homes = {f"{other}.{member}" for other, m in modules.items()
                     if getattr(m, member, None) is obj} | {f"{name}.{member}"}  # fmt: skip
            if not homes & ids:
                missing.append(f"{name}.{member}")
    assert not missing, f"not in docs/api.md: {missing}"
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert not re.search(r":(class|func|meth|attr|mod|exc):`", text), "a Sphinx role as written"
    assert html.count("autorefs-internal") > 40  # the roles are links


def check_the_command_reference(html: str) -> None:
    """The built page says what ``--help`` says: each command's real
    defaults (no Click sentinel, no function's repr) and its examples as
    code, line by line."""
    from click.testing import CliRunner

    from im2rec.cli import COMMANDS, main

    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert "Sentinel" not in text and "<function" not in text and "UNSET" not in text
    flat = " ".join(text.split())
    for command in sorted(COMMANDS):
        assert f'id="rec-{command}"' in html, command
        shown = CliRunner().invoke(main, [command, "--help"], terminal_width=79).output
        examples = (
            shown.split("Examples:", 1)[1].split("\n\n", 1)[0] if "Examples:" in shown else ""
        )
        for line in examples.splitlines():
            assert line.strip() in text, (command, line)
    assert "[default: 95]" in flat and "[default: (number of CPUs); x>=1]" in flat


def test_every_file_the_docs_point_to_exists() -> None:
    """``tests/...``, ``bench/...``, ``im2rec/...`` and ``scripts/...`` paths in
    the README and the docs name files that exist (they move with the code)."""
    named = set()
    for page in [*DOCS, ROOT / "CONTRIBUTING.md"]:
        named |= set(
            re.findall(
                r"\b((?:tests|bench|im2rec|scripts|examples)/[\w/.-]+\.(?:py|md|c|h|sh))",
                page.read_text(),
            )
        )
    assert len(named) > 20
    elsewhere = {
        "scripts/datasets/imagenet.py",
        "tests/python/unittest/test_recordio.py",
    }  # GluonCV's, MXNet's
    assert sorted(p for p in named - elsewhere if not (ROOT / p).exists()) == []


def test_no_install_line_asks_the_registry_for_im2rec() -> None:
    """im2rec is not on PyPI yet: `pip install im2rec` fails as printed
    as printed. Every install of im2rec itself is from a checkout."""
    pages = [*DOCS, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "examples").glob("*.md"))]
    found = [
        (page.name, line.strip())
        for page in pages
        for line in page.read_text().splitlines()
        if re.search(r"pip install [\"']?im2rec\b", line)
    ]
    assert found == []


def test_rec_imagenet_on_the_fake_runs_as_printed(tmp_path: Path) -> None:
    """docs/imagenet.md's try-out: the fake ILSVRC2012 and rec imagenet on it
    (the way to see it work without the 155 GB)."""
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "fake_imagenet.py", tmp_path / "examples")
    section = _section("docs/imagenet.md", "Trying it on a fake", "The tars and their checksums")
    out = _run_blocks(section, tmp_path)
    assert "labels  0 n01440764: 2, 1 n01443537: 2, 2 n01484850: 2" in out, out
    assert (tmp_path / "fake-imagenet" / "rec" / "train.rec").stat().st_size > 0
    assert sorted(p.name for p in (tmp_path / "fake-imagenet" / "train").iterdir()) == [
        "n01440764", "n01443537", "n01484850",
    ]  # fmt: skip


def test_the_readme_counts_the_c_extensions_there_are() -> None:
    """It said five; there are three (im2rec.native.MODULES)."""
    from im2rec.native import MODULES

    words = {3: "three", 4: "four", 5: "five"}
    readme = (ROOT / "README.md").read_text()
    assert f"builds {words[len(MODULES)]}\nsmall optional C extensions" in readme
    assert f"with all {words[len(MODULES)]} and libjpeg-turbo bundled" in readme


def test_every_page_reaches_detection_hugging_face_and_resuming() -> None:
    """The index and the README's docs paragraph had no row for them."""
    index, readme = (ROOT / "docs/index.md").read_text(), (ROOT / "README.md").read_text()
    for page in ("detection.md", "huggingface.md", "resuming.md"):
        assert f"]({page})" in index and f"](docs/{page})" in readme, page


def test_pages_that_list_example_say_where_it_comes_from() -> None:
    """The Hugging Face and resuming pages began with `rec list example`
    and never said where `example` came from."""
    for page in DOCS:
        text = page.read_text()
        blocks = [m for m in re.finditer(r"```sh\n(.*?)```", text, re.S)
                  if re.search(r"rec list \.?/?example\b", m.group(1))]  # fmt: skip
        if blocks:
            assert "examples/example" in text[: blocks[0].start()], page.name


def test_the_hub_upload_command_shown_exists() -> None:
    """`huggingface-cli upload` is gone from current huggingface_hub."""
    hf = Path(sys.executable).parent / "hf"
    if not hf.exists():
        pytest.skip("huggingface_hub's command line is not installed")
    text = (ROOT / "docs/huggingface.md").read_text()
    shown = re.search(r"`(hf upload [^`]*)`", text.replace("\n", " "))
    assert shown is not None and "huggingface-cli upload" not in text.replace(
        "`huggingface-cli` was", ""
    )
    done = subprocess.run([str(hf), "upload", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--repo-type" in done.stdout


def test_the_overwrite_option_speaks_of_partial_output() -> None:
    """commands.md said a run without --resume starts over; it refuses, and
    --overwrite is what discards the partial output."""
    from click.testing import CliRunner

    from im2rec.cli import main

    shown = " ".join(CliRunner().invoke(main, ["pack", "--help"]).output.split())
    assert "Start over: discard an interrupted run's partial output" in shown
    commands = " ".join((ROOT / "docs/commands.md").read_text().split())
    assert "a run refuses to start where an interrupted one left partial output" in commands


@pytest.mark.parametrize("start", START_METHODS)
def test_the_remote_page_runs_as_printed(tmp_path: Path, start: str) -> None:
    """docs/remote.md's Python, against a real S3-compatible server on
    localhost (moto's) holding the records at the URLs the page names."""
    pytest.importorskip("torch")
    from tests.s3server import s3_server
    from tests.training.test_iterator import jpeg_rec

    (tmp_path / "made").mkdir()
    rec = jpeg_rec(tmp_path / "made" / "train.rec", 20, (48, 40))
    home = tmp_path / "home"  # (the page's cache folder is under ~)
    home.mkdir()
    with s3_server() as client:
        client.create_bucket(Bucket="bucket", ACL="public-read")  # (the page reads it anonymously)
        for key in ("train", "imagenet/train"):
            for ext in (".rec", ".idx"):
                client.upload_file(
                    str(rec.with_suffix(ext)),
                    "bucket",
                    f"{key}{ext}",
                    ExtraArgs={"ACL": "public-read"},
                )
        os.environ["HOME"], saved = str(home), os.environ["HOME"]
        try:
            out = _run_blocks((ROOT / "docs/remote.md").read_text(), tmp_path, start, only="python")
        finally:
            os.environ["HOME"] = saved
    assert "epoch 0 samples 20" in out and "epoch 1 samples 20" in out
