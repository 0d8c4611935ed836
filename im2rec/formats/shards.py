"""WebDataset's shard names: shell globs and brace notation
(``train-{000000..000009}.tar``, ``{a,b}``), expanded in the order given
and bounded before any name is made (the choices of several braces in one
pattern multiply)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable

from ..errors import ConfigError, MissingFileError

__all__ = ["MAX_EXPANSION", "expand_shards"]


def expand_shards(patterns: list[str], exists: Callable[[str], bool] = os.path.exists) -> list[str]:
    """Shard names from shell globs and WebDataset's brace notation
    (``train-{000000..000009}.tar``, ``{a,b}``), in the order given; at
    most :data:`MAX_EXPANSION` names in all, counted before any is made."""
    total = sum(_brace_count(pattern) for pattern in patterns)
    if total > MAX_EXPANSION:
        raise ConfigError(
            f"{' '.join(patterns)}: the brace patterns name over {MAX_EXPANSION:,} shards; name "
            "fewer (the choices of several braces in one pattern multiply)"
        )
    out: list[str] = []
    for pattern in patterns:
        for name in _braces(pattern):
            if glob.has_magic(name):
                found = sorted(glob.glob(name))
                if not found:
                    raise MissingFileError(f"{name}: no shard matches")
                out.extend(found)
            elif not exists(name):
                raise MissingFileError(f"{name}: shard not found")
            else:
                out.append(name)
    return out


# Not braceexpand (WebDataset's): it builds a brace's whole range before the
# first name (x{0..10**12}{0..10**12} never returns) and takes backslashes as
# escapes; a pattern is user input, counted before any name (docs/security.md).
_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"(\d+)\.\.(\d+)")
MAX_EXPANSION = 1_000_000
_MAX_DIGITS = 18  # a range's ends: past this they are no shard numbers (and int() is slow)


def _choices(body: str) -> int | list[str]:
    """How many names one ``{body}`` stands for, without making them: an
    int for a range, the list for a comma list (a literal otherwise)."""
    numbers = _RANGE.fullmatch(body)
    if numbers:
        a, b = numbers.groups()
        if max(len(a), len(b)) > _MAX_DIGITS:
            raise ConfigError(f"{{{body}}}: a range's ends have more than {_MAX_DIGITS} digits")
        return abs(int(b) - int(a)) + 1
    return body.split(",") if "," in body else ["{" + body + "}"]


def _brace_count(text: str) -> int:
    """The number of names ``_braces(text)`` makes: the product of each
    brace's choices (capped once past the limit, so it stays small)."""
    count = 1
    for match in _BRACE.finditer(text):
        choices = _choices(match.group(1))
        count *= choices if isinstance(choices, int) else len(choices)
        if count > MAX_EXPANSION:
            return MAX_EXPANSION + 1
    return count


def _braces(text: str) -> list[str]:
    """Brace expansion: ``{a,b}`` lists and ``{000..009}`` ranges (zero
    padding kept), left to right (bounded by :func:`_brace_count` first)."""
    match = _BRACE.search(text)
    if match is None:
        return [text]
    body = match.group(1)
    numbers = _RANGE.fullmatch(body)
    if numbers:
        a, b = numbers.groups()
        if max(len(a), len(b)) > _MAX_DIGITS or abs(int(b) - int(a)) >= MAX_EXPANSION:
            raise ConfigError(f"{text}: the range {{{body}}} names over {MAX_EXPANSION:,} shards")
        width = len(a) if a.startswith("0") or len(a) == len(b) else 0
        lo, hi = int(a), int(b)
        step = 1 if hi >= lo else -1
        choices = [f"{n:0{width}d}" for n in range(lo, hi + step, step)]
    else:
        found = _choices(body)
        assert isinstance(found, list)
        choices = found
    head, tail = text[: match.start()], text[match.end() :]
    rest = _braces(tail)
    return [f"{head}{choice}{after}" for choice in choices for after in rest]
