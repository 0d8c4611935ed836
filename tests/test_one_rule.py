"""Each rule has one home: a second spelling of it in the package's Python
fails here, naming the file and line (comments and strings are not code,
and are not read)."""

from __future__ import annotations

import io
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "im2rec"

#: (the rule, what spells it, the modules where it lives, spellings it must catch)
RULES = [
    ("the length word's cflag", r">>\s*29\b|<<\s*29\b|\b0x1[fF]{7}\b",
     {"recordio/codec.py"}, ["cflag = lrec >> 29", "(cflag << 29) | n", "w & 0x1FFFFFFF"]),
    ("the length word's length", r"\bLENGTH_MASK\b", {"recordio/codec.py"},
     ["n = lrec & LENGTH_MASK"]),
    ("padding to 4 bytes", r"&\s*~\s*3\b|&\s*3\b|\+\s*3\s*\)\s*&|%\s*4\b|\+\s*11\s*\)",
     {"recordio/codec.py"},
     ["p = (n + 3) & ~3", "if n & 3:", "pad = -n % 4", "off % 4 != 0", "t = (n + 11) & m"]),
    ("the frame head's struct", r"Struct\s*\(\s*[\"']<II[\"']\s*\)", {"recordio/codec.py"},
     ['H = struct.Struct("<II")']),
    ("the image header's struct", r"Struct\s*\(\s*[\"']<IfQQ[\"']\s*\)", {"recordio/codec.py"},
     ['H = struct.Struct("<IfQQ")']),
    ("where the image starts", r"\b24\s*\+\s*8\b|\b8\s*\+\s*24\b|\b4\s*\*\s*(header\s*\.\s*)?flags?\b",
     {"recordio/codec.py"}, ["w == 24 + 8", "s = 8 + 24 + x", "e = HEADER_SIZE + 4 * flag",
                             "s = 4 * header.flag"]),
    ("whether a record holds its labels", r"\bimage_start\s*\([^)]*\)\s*<=|>=\s*image_start\s*\(",
     {"recordio/codec.py"}, ["fits = image_start(flag) <= n", "ok = lrec >= image_start(0)"]),
    ("a class index", r"\b2(\.0)?\s*\*\*\s*53\b|\b1\s*<<\s*53\b", {"recordio/header.py"},
     ["0 <= v < 2**53", "v < 2.0 ** 53", "abs(v) < 1 << 53"]),
    ("decoding upright", r"\bexif_transpose\b|\.\s*draft\s*\([^,]*,\s*\(|\bexif_orientation\s*\(",
     {"imaging/codec.py"}, ["im = ImageOps.exif_transpose(im)", 'im.draft("RGB", (w, h))',
                            "o = exif_orientation(im)"]),
    ("the DCT scale", r"\bfits\s*>=\s*[248]\b|\bin\s*\(\s*8\s*,\s*4\s*,\s*2|\[\s*[01]\s*\]\s*\*\s*2\s*>",
     {"imaging/jpeg.py"}, ["s = ops.where(fits >= 8, 8, 1)", "for a in (8, 4, 2, 1):",
                            "if size[0] * 2 > crop_w:"]),
    ("the short-side resize", r"\bresize\s*\*\s*\w+\s*//|\w+\s*\*\s*resize\s*//",
     {"imaging/codec.py"}, ["w2 = resize * w // h", "(h * resize // w)"]),
    ("path confinement", r"[\"']\.\.[\"']\s*(not\s+)?in\b|[\"']\.[\"']\s*,\s*[\"']\.\.[\"']|/\(\?!",
     {"storage/confined.py"}, ['if ".." in name.split("/"):', 'if part in ("", ".", ".."):',
                               'P = re.compile(r"(?:[a-z]|/(?!\\.|/))*")']),
    ("a sampler's resume bookkeeping", r"\.\s*yielded\s*\+=|\.\s*begun\s*=",
     {"training/sampler_state.py"}, ["self.yielded += 1", "self.start = self.begun = start"]),
    ("on_corrupt's values", r"\bon_corrupt\s+not\s+in\b|\bon_corrupt\s*==\s*[\"']skip",
     {"training/vocabulary.py"}, ['if on_corrupt not in ("raise", "skip"):',
                                  'skip = on_corrupt == "skip"']),
    ("the iterators' shared checks", r"\b(prefetch_buffer|shuffle_chunk_size)\s*<\s*0",
     {"training/epochs.py"}, ["if self.prefetch_buffer < 0:", "if shuffle_chunk_size < 0:"]),
]  # fmt: skip


@cache
def code_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, code)`` of a module, its comments and prose left out
    (a string with a space in it: a string without one, such as a struct
    format, is code)."""
    kept: dict[int, list[str]] = {}
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    for token in tokens:
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            continue
        if token.type == tokenize.STRING and re.search(r"\s", token.string):
            continue
        if token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            continue
        kept.setdefault(token.start[0], []).append(token.string)
    return [(n, " ".join(parts)) for n, parts in sorted(kept.items())]


def spellings(pattern: str, homes: set[str]) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name in homes:
            continue
        for n, code in code_lines(path):
            if re.search(pattern, code):
                found.append(f"im2rec/{name}:{n}: {code}")
    return found


@pytest.mark.parametrize(("rule", "pattern", "homes", "examples"), RULES, ids=[r[0] for r in RULES])
def test_a_rule_is_spelled_in_its_home_only(
    tmp_path: Path, rule: str, pattern: str, homes: set[str], examples: list[str]
) -> None:
    for i, example in enumerate(examples):  # (a rotted pattern would pass everything)
        module = tmp_path / f"example{i}.py"
        module.write_text(example + "\n")
        assert any(re.search(pattern, c) for _, c in code_lines(module)), (rule, example)
    for home in homes:
        assert (PACKAGE / home).is_file(), home
    found = spellings(pattern, homes)
    assert not found, f"{rule} is spelled outside {sorted(homes)}:\n" + "\n".join(found)


def test_a_second_spelling_is_found(tmp_path: Path) -> None:
    """The scan sees code, not comments or strings."""
    module = tmp_path / "m.py"
    module.write_text('x = lrec >> 29  # lrec >> 29\ny = "the lrec >> 29"\n')
    code = code_lines(module)
    assert [n for n, c in code if re.search(RULES[0][1], c)] == [1]
