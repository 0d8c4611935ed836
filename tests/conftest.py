"""Shared fixtures: golden files made by real MXNet, and a runner for MXNet code."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from PIL import Image

if TYPE_CHECKING:
    from .imagenet_fixture import FakeImagenet

from .faces_data import faces  # noqa: F401  (a fixture of the face-layout tests)

GOLDEN = Path(__file__).parent / "golden"


def children_of(pid: int) -> list[int]:
    """The child processes of ``pid`` now (Linux's /proc; none elsewhere)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def wait_gone(pids: list[int], timeout: float = 30.0) -> None:
    """Poll until every one of ``pids`` has exited (a zombie counts as gone:
    its parent was killed, so nobody reaps it but init)."""
    import time

    def alive(pid: int) -> bool:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        return not any(line.startswith("State:") and "Z" in line for line in status.splitlines())

    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(alive(p) for p in pids), f"still running after {timeout:g} s: {pids}"


def touch(root: Path, *paths: str) -> None:
    """Create small placeholder files (listing reads names, not pixels)."""
    for p in paths:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_bytes(b"x")


@pytest.fixture(scope="session", autouse=True)
def _caches_of_the_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """im2rec's caches (index copies) go to a folder of this run, not the
    user's ~/.cache; the `rec` processes the tests start inherit it."""
    os.environ["IM2REC_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache-home"))


@pytest.fixture(scope="session")
def golden() -> Path:
    return GOLDEN


@pytest.fixture(scope="session")
def manifest() -> dict[str, Any]:
    return json.loads((GOLDEN / "manifest.json").read_text())


class MXNet:
    """Runs snippets under the real MXNet 1.9.1 interpreter (``make compat``)."""

    def __init__(self, python: str):
        # absolute: some checks run it from another working directory
        self.python = os.path.abspath(shutil.which(python) or python)

    @property
    def im2rec_py(self) -> str:
        """The im2rec.py that the mxnet 1.9.1 wheel ships."""
        return str(
            self.run(
                "import os; result = os.path.join(os.path.dirname(mx.__file__), 'tools', 'im2rec.py')"
            )
        )

    def im2rec(self, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run im2rec.py with this interpreter."""
        return subprocess.run(
            [self.python, self.im2rec_py, *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=600,
            check=True,
        )

    def run(self, code: str, **params: Any) -> Any:
        """Run ``code`` with ``params`` bound as globals; it sets ``result``,
        which comes back through JSON."""
        program = (
            "import json, sys, warnings\nwarnings.simplefilter('ignore')\n"
            "import numpy as np\nimport mxnet as mx\n"
            f"globals().update(json.loads({json.dumps(json.dumps(params))}))\n"
            + textwrap.dedent(code)
            + "\nprint('@@RESULT@@' + json.dumps(result))\n"
        )
        proc = subprocess.run(
            [self.python, "-"], input=program, capture_output=True, text=True, timeout=300
        )
        if proc.returncode != 0:
            raise AssertionError(f"MXNet snippet failed:\n{proc.stderr[-3000:]}")
        line = proc.stdout.rsplit("@@RESULT@@", 1)[1]
        return json.loads(line)


@pytest.fixture(scope="session")
def mxnet() -> MXNet:
    python = os.environ.get("IM2REC_MXNET_PYTHON")
    if not python:
        pytest.fail("IM2REC_MXNET_PYTHON is not set: run the MXNet cross-checks with `make compat`")
    return MXNet(python)


def photo(width: int, height: int, seed: int = 0) -> Image.Image:
    """A small photo-like RGB image: a smooth colour field with some grain."""
    rng = np.random.default_rng(seed)
    low = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    field = np.asarray(
        Image.fromarray(low).resize((width, height), Image.Resampling.BICUBIC), np.int16
    )
    grain = rng.integers(-6, 7, (height, width, 1), dtype=np.int16)
    return Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8))


def make_odd_images(root: Path) -> dict[str, str]:
    """Every kind of input ``rec pack`` must take (or reject cleanly), with
    what should happen: "ok" or the failure reason."""
    root.mkdir(parents=True, exist_ok=True)
    base = photo(64, 48, 1)
    cases: dict[str, str] = {}

    def save(name: str, im: Image.Image, fmt: str, expect: str = "ok", **params: Any) -> None:
        im.save(root / name, fmt, **params)
        cases[name] = expect

    save("rgb.jpg", base, "JPEG", quality=90)
    save("wide.jpg", photo(90, 30, 2), "JPEG")
    save("tall.jpg", photo(30, 90, 3), "JPEG")
    save("gray.jpg", base.convert("L"), "JPEG")
    save("cmyk.jpg", base.convert("CMYK"), "JPEG")
    save("palette.png", base.convert("P"), "PNG")
    save("alpha.png", base.convert("RGBA"), "PNG")
    save("gray_alpha.png", base.convert("LA"), "PNG")
    sixteen = Image.fromarray((np.arange(48 * 64, dtype=np.uint16) * 20).reshape(48, 64))
    save("sixteen.png", sixteen, "PNG")
    save("png_named.JPEG", base, "PNG")  # PNG data behind a .JPEG name, as in ImageNet
    # a LAB TIFF: Pillow opens it, and converts it to RGB only with littlecms
    # (which a Pillow-SIMD built without it lacks: that image fails, alone)
    from PIL import features

    lab = "ok" if features.check("littlecms2") else "undecodable"
    save("lab_tiff.jpg", Image.new("LAB", (64, 48), (60, 20, 200)), "TIFF", expect=lab)
    exif = Image.Exif()
    exif[0x0112] = 6  # shown rotated by 90 degrees
    save("rotated.jpg", base, "JPEG", exif=exif.tobytes())
    data = (root / "rgb.jpg").read_bytes()
    (root / "truncated.jpg").write_bytes(data[: len(data) // 3])
    cases["truncated.jpg"] = "undecodable"
    (root / "text.jpg").write_bytes(b"this is not an image")
    cases["text.jpg"] = "undecodable"
    # 144 Mpx of 1-bit zeros: a few KB on disk, past Pillow's pixel limit.
    save("bomb.png", Image.new("1", (12_000, 12_000)), "PNG", expect="decompression-bomb")
    cases["missing.jpg"] = "missing"
    (root / "a_folder.jpg").mkdir()
    cases["a_folder.jpg"] = "unreadable"
    return cases


def photo_folder(
    folder: Path, count: int, size: Callable[[int], tuple[int, int]], name: str = "{i}.jpg",
    **save: Any,
) -> list[str]:  # fmt: skip
    """``count`` photos ``size(i)`` pixels big, saved as ``name.format(i=i)``
    in ``folder``; returns the names, for :func:`write_lst`."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [name.format(i=i) for i in range(count)]
    for i, n in enumerate(names):
        photo(*size(i), seed=i).save(folder / n, **save)
    return names


def write_lst(path: Path, names: list[str], labels: list[list[float]] | None = None) -> Path:
    lines = []
    for i, name in enumerate(names):
        label = labels[i] if labels else [float(i % 3)]
        lines.append("\t".join([str(i), *(f"{v:f}" for v in label), name]) + "\n")
    path.write_text("".join(lines))
    return path


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    """A real S3-compatible server (moto's) on localhost, found through the
    ``AWS_*`` variables; yields a boto3 client with the bucket ``data``."""
    from .s3server import s3_server

    with s3_server() as client:
        yield client


#: Modules whose tests leave threads running in the test process for the
#: rest of its life (the S3 and HTTP servers on localhost, fsspec's and
#: Dask's I/O loops). Forking is not safe after that (executors.fork_is_safe
#: then picks a fork server or threads), and the tests of forked workers
#: need it safe. So these run last in each pytest-xdist worker.
_LEAVE_THREADS = (
    "tests/storage/test_remote.py",
    "tests/storage/test_bounded.py",
    "tests/storage/test_storage.py",
    "tests/packing/test_remote.py",
    "tests/packing/test_sharding.py",
    "tests/packing/test_cluster.py",
    "tests/training/test_blockorder.py",
    "tests/storage/test_blockcache.py",
    "tests/storage/test_objects.py",
    "tests/listing/test_buckets.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_leaves_threads)  # stable: else as found


def _leaves_threads(item: pytest.Item) -> bool:
    """Whether a test leaves threads behind: its module is one of
    :data:`_LEAVE_THREADS`, or it uses the S3 server wherever it is."""
    return item.nodeid.startswith(_LEAVE_THREADS) or "s3" in getattr(item, "fixturenames", ())


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background (``nohup``, ``make test &``, some CI
    runners) inherits SIGINT ignored, and so would every ``rec`` it starts:
    the tests of Ctrl-C would see it ignored. Their children get the default."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def fake(tmp_path: Path) -> FakeImagenet:
    """A small ImageNet download (its tars and GluonCV's val map) in tmp_path."""
    from .imagenet_fixture import make_fake_imagenet

    fake = make_fake_imagenet(tmp_path / "download")
    fake.write_pklz(fake.download / "imagenet_val_maps.pklz")
    return fake
