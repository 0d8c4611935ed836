"""``im2rec PREFIX ROOT [options]``: MXNet's tools/im2rec.py command line, on
the ``rec list`` / ``rec pack`` pipelines.

The arguments are im2rec.py's, parsed the same way (argparse, ``--exts``
takes several values), with the same defaults (docs/format.md, "im2rec.py",
"Command line"), so existing scripts only change the command name. The files
are the same: ``--list`` writes the same ``.lst`` entries (and prints the
class map the way im2rec.py did); otherwise every ``PREFIX*.lst`` beside
PREFIX is packed into ``.rec``/``.idx`` with the same record headers and
order. Where im2rec.py ignored an option (image options with
``--pass-through``, ``--test-ratio`` when ``--train-ratio`` is 1) this does
too, with a note. Differences: ``--num-thread`` defaults to the number of
CPUs (the output is the same for any count), a bad image is skipped and
reported in every mode, and the sidecar files of ``rec list``/``rec pack``
(class map, run record, manifest) are written too. One option is added:
``--resume`` continues an interrupted run, which the interruption message
asks for."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import ConfigError, Im2RecError
from ..executors import LocalExecutor, check_workers, default_workers
from ..listing.making import ListOptions, make_lists
from ..packing import PackOptions, pack_list
from .common import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    by_sigterm,
    os_error_text,
    sigterm_as_interrupt,
)

__all__ = ["main"]


def _threads(args: argparse.Namespace) -> int:
    """``--num-thread``, or the number of CPUs."""
    threads: int | None = getattr(args, "num_thread", None)
    return default_workers() if threads is None else threads


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="im2rec",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Create an image list or make a record database by reading from an image "
        "list (MXNet's im2rec.py command line, without MXNet).",
    )
    p.add_argument("prefix", help="prefix of input/output lst and rec files.")
    p.add_argument("root", help="path to folder containing images.")
    c = p.add_argument_group("Options for creating image lists")
    c.add_argument("--list", action="store_true", help="create image list(s) instead of records")
    c.add_argument("--exts", nargs="+", default=[".jpeg", ".jpg", ".png"], help="image extensions")
    c.add_argument("--chunks", type=int, default=1, help="number of chunks.")
    c.add_argument("--train-ratio", type=float, default=1.0, help="ratio of images for training.")
    c.add_argument("--test-ratio", type=float, default=0, help="ratio of images for testing.")
    c.add_argument("--recursive", action="store_true", help="one label per subfolder")
    c.add_argument(
        "--no-shuffle",
        dest="shuffle",
        action="store_false",
        default=argparse.SUPPRESS,  # no "(default: True)" beside a flag that turns it off
        help="keep the walk order (im2rec.py shuffles with seed 100)",
    )
    r = p.add_argument_group("Options for creating database")
    r.add_argument("--pass-through", action="store_true", help="store the image files as they are")
    r.add_argument("--resize", type=int, default=0, help="shorter edge of the image, 0 to keep")
    r.add_argument("--center-crop", action="store_true", help="crop the centred square first")
    r.add_argument("--quality", type=int, default=95, help="JPEG quality, or PNG compression 0-9")
    r.add_argument(
        "--num-thread",
        type=int,
        default=argparse.SUPPRESS,  # (the machine's CPUs: printed as that, not as a number)
        help="worker processes (default: the number of CPUs)",
    )
    r.add_argument(
        "--color", type=int, default=1, choices=[-1, 0, 1], help="1 colour, 0 gray, -1 unchanged"
    )
    r.add_argument(
        "--encoding", type=str, default=".jpg", choices=[".jpg", ".png"], help="image encoding"
    )
    r.add_argument(
        "--pack-label", action="store_true", help="pack every label of multi-label lines"
    )
    x = p.add_argument_group("Not in im2rec.py")
    x.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run from its partial output (byte-identical result)",
    )
    return p


def _note(text: str) -> None:
    print(f"im2rec: {text}", file=sys.stderr)


def _make_list(args: argparse.Namespace) -> None:
    test_ratio = args.test_ratio
    if args.train_ratio == 1.0 and test_ratio:
        _note("--test-ratio is ignored when --train-ratio is 1 (as in im2rec.py)")
        test_ratio = 0.0
    options = ListOptions(
        recursive=args.recursive, exts=tuple(args.exts), chunks=args.chunks,
        train_ratio=args.train_ratio, test_ratio=test_ratio, shuffle=getattr(args, "shuffle", True),
    )  # fmt: skip
    result = make_lists(args.root, args.prefix, options)
    if args.recursive:  # im2rec.py printed the class map; scripts may read it
        for label, folder in enumerate(result.scan.classes):
            print(folder, label)
    _note(f"hint: the same with rec: rec list {args.root} -o {args.prefix}{_list_flags(options)}")


def _list_flags(options: ListOptions) -> str:
    """The ``rec list`` options that make the same lists as ``options``."""
    defaults = ListOptions()
    flags = ["--recursive"] if options.recursive else []
    if tuple(options.exts) != tuple(defaults.exts):
        flags.append("--exts " + ",".join(options.exts))
    for flag, name in (
        ("--chunks", "chunks"), ("--train-ratio", "train_ratio"), ("--test-ratio", "test_ratio"),
    ):  # fmt: skip
        if getattr(options, name) != getattr(defaults, name):
            flags.append(f"{flag} {getattr(options, name)}")
    if not options.shuffle:
        flags.append("--no-shuffle")
    return "".join(f" {f}" for f in flags)


def _pack_options(args: argparse.Namespace) -> PackOptions:
    if args.pass_through:
        ignored = [
            flag for flag, value, default in (
                ("--resize", args.resize, 0), ("--center-crop", args.center_crop, False),
                ("--quality", args.quality, 95), ("--encoding", args.encoding, ".jpg"),
                ("--color", args.color, 1),
            ) if value != default
        ]  # fmt: skip
        if ignored:
            _note(f"{', '.join(ignored)} ignored with --pass-through (as in im2rec.py)")
        return PackOptions(pass_through=True, pack_label=args.pack_label)
    return PackOptions(
        pack_label=args.pack_label, resize=args.resize, center_crop=args.center_crop,
        quality=args.quality, encoding=args.encoding, color=args.color,
    )  # fmt: skip


def _lists_for(prefix: str) -> tuple[str, list[str]]:
    # im2rec.py: every file in the working folder whose absolute path starts
    # with PREFIX and ends with .lst (here sorted, for a stable order).
    working_dir = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
    names = sorted(os.listdir(working_dir))
    lists = [
        os.path.join(working_dir, n) for n in names
        if os.path.join(working_dir, n).startswith(prefix) and n.endswith(".lst")
        and os.path.isfile(os.path.join(working_dir, n))
    ]  # fmt: skip
    return working_dir, lists


def _pack(args: argparse.Namespace) -> int:
    options = _pack_options(args)
    working_dir, lists = _lists_for(args.prefix)
    if not lists:
        print(f"Did not find and list file with prefix {args.prefix}")  # im2rec.py's words
        return 0
    with LocalExecutor(
        max(1, _threads(args)), preload=["im2rec.packing", "im2rec.imaging.codec"],
        option="--num-thread",
    ) as executor:  # fmt: skip
        executor.start(io_bound=options.pass_through)
        for lst in lists:
            print(f"Creating .rec file from {lst} in {working_dir}")
            result = pack_list(lst, options, root=args.root, executor=executor, resume=args.resume)
            if result.discarded_partial:
                _note(
                    f"an interrupted run's partial output ({result.discarded_partial:,} bytes) "
                    "was discarded and packing started over, as im2rec.py does; --resume "
                    "continues one"
                )
            if result.failure_report:
                _note(
                    f"{sum(result.failures.values()):,} image(s) skipped; "
                    f"see {result.failure_report}"
                )
    _note(
        f"hint: the same with rec: rec pack {args.prefix} --root {args.root}{_rec_flags(options)}"
    )
    return 0


def _rec_flags(options: PackOptions) -> str:
    """The ``rec pack`` options that make the same records as ``options``."""
    defaults = PackOptions()
    flags = [
        flag
        for flag, on in (
            ("--pass-through", options.pass_through),
            ("--pack-label", options.pack_label),
            ("--center-crop", options.center_crop),
        )
        if on
    ]
    for flag, name in (
        ("--resize", "resize"), ("--quality", "quality"),
        ("--encoding", "encoding"), ("--color", "color"),
    ):  # fmt: skip
        if getattr(options, name) != getattr(defaults, name):
            flags.append(f"{flag} {getattr(options, name)}")
    return "".join(f" {f}" for f in flags)


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    try:  # (at most 1 is im2rec.py's: one process)
        check_workers(max(1, _threads(args)), "--num-thread")
    except ConfigError as exc:
        parser.error(str(exc))
    args.prefix = os.path.abspath(args.prefix)
    args.root = os.path.abspath(args.root)
    try:
        with sigterm_as_interrupt():
            if args.list:
                _make_list(args)
                code = 0
            else:
                code = _pack(args)
    except Im2RecError as exc:
        print(f"im2rec: error: {exc}", file=sys.stderr)
        code = getattr(exc, "exit_code", 1)
        code = EXIT_TERMINATED if code == EXIT_INTERRUPTED and by_sigterm(exc) else code
    except KeyboardInterrupt as exc:
        print(f"im2rec: {'terminated' if by_sigterm(exc) else 'interrupted'}", file=sys.stderr)
        code = EXIT_TERMINATED if by_sigterm(exc) else EXIT_INTERRUPTED
    except OSError as exc:  # the file system said no (a read-only folder, a full disk)
        print(f"im2rec: error: {os_error_text(exc)}", file=sys.stderr)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
