"""No module of im2rec imports a module that imports it back, directly or
through others, not even inside a function (imports for type checking
only are not counted). The layers themselves are import-linter's contracts
in pyproject.toml (make lint)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import im2rec

PACKAGE = Path(im2rec.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str) -> set[str]:
    """The im2rec modules ``name`` imports anywhere in its code."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
            prefix = (
                ".".join(base + [node.module] if node.module else base)
                if node.level
                else (node.module or "")
            )
            for alias in node.names:
                full = f"{prefix}.{alias.name}"
                found.add(full if full in MODULES else prefix)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {m for m in found if m in MODULES and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return found


@pytest.mark.slow
def test_no_import_cycles() -> None:
    graph = {name: imported(name) for name in MODULES}
    assert "im2rec.recordio.index_cache" in graph["im2rec.recordio.views"]  # (the walk works)
    assert cycles(graph) == []


def test_the_finder_sees_a_cycle_hidden_in_a_function() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


#: the package root: the public API and the bottom layer (errors, version,
#: the native loader; the worker pools are a folder of that layer)
ROOT_MODULES = {"im2rec", "im2rec.__main__", "im2rec.errors", "im2rec.version", "im2rec.native",
                "im2rec.progress"}  # fmt: skip


def test_the_root_holds_only_the_api_and_the_bottom_layer() -> None:
    """Every capability lives in its folder (architecture.md); a new module
    at the root is a decision, made here."""
    root = {name for name, path in MODULES.items() if path.parent == PACKAGE}
    assert root == ROOT_MODULES


def test_every_package_is_in_a_layer() -> None:
    """A new folder must take a place in pyproject.toml's layers contract."""
    text = (PACKAGE.parent / "pyproject.toml").read_text()
    layers = text.split('type = "layers"', 1)[1].split("]", 1)[0]
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert {f for f in folders if f"im2rec.{f}" not in layers} == set()


def test_the_public_names_are_the_training_layers() -> None:
    """``im2rec.RecordDataset`` and its siblings are the objects of
    :mod:`im2rec.training` (the one path the docs teach)."""
    from im2rec import training

    assert training.RecordDataset is im2rec.RecordDataset
    assert training.ImageRecordIter is im2rec.ImageRecordIter
    assert training.Augmenter is im2rec.Augmenter
    for gone in ("loader", "iterator", "augment"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"im2rec.{gone}")


def test_the_version_is_the_packages() -> None:
    text = (PACKAGE.parent / "pyproject.toml").read_text()
    assert f'version = "{im2rec.__version__}"' in text


def test_the_dev_lock_pins_every_extra() -> None:
    """make install installs with constraints/dev.txt (make lock writes it):
    a dependency added to an extra without `make lock` would be resolved
    unpinned again, the slow search the lock exists to skip."""
    import re

    root = PACKAGE.parent
    text = (root / "pyproject.toml").read_text()
    extras = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    wanted = {
        re.split(r"[<>=\[ ;]", req, maxsplit=1)[0].lower().replace("_", "-")
        for req in re.findall(r'"([A-Za-z0-9_.\-]+[^"]*)"', extras)
    }
    pinned = {
        line.split("==", 1)[0].lower().replace("_", "-")
        for line in (root / "constraints" / "dev.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    assert len(wanted) > 10
    assert sorted(wanted - pinned) == []
