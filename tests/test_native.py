"""The C extensions as one unit: one loader, one switch, one report."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from im2rec import native
from im2rec.cli import main

PACKAGE = Path(native.__file__).parent


def test_every_extension_is_known_to_the_loader() -> None:
    sources = {
        ".".join(("im2rec", *path.relative_to(PACKAGE).with_suffix("").parts))
        for path in PACKAGE.rglob("_*.c")
    }
    assert sources == set(native.MODULES.values())


def test_no_module_imports_an_extension_but_the_loader() -> None:
    # (an extension imported anywhere else would escape IM2REC_NO_NATIVE)
    names = {module.rsplit(".", 1)[1] for module in native.MODULES.values()}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "native.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                imported = {node.module.rsplit(".", 1)[-1] if node.module else ""}
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                imported = {alias.name.rsplit(".", 1)[-1] for alias in node.names}
            else:
                continue
            assert not imported & names, f"{path}:{node.lineno} imports an extension"


def run(code: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("IM2REC_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**environment, **env})  # fmt: skip
    return done.stdout.strip()


@pytest.mark.slow
def test_one_switch_turns_every_extension_off() -> None:
    code = """
from im2rec.recordio import framing
from im2rec.imaging import jpeg
from im2rec.training.augment import fused
print(framing._has_word, jpeg._native, fused._tensor, jpeg.enabled(), fused.available())
"""
    assert run(code, IM2REC_NO_NATIVE="1") == "None None None False False"
    built = [ext.state for ext in native.extensions()]
    if all(state == "on" for state in built):  # (this build has them all)
        assert "None" not in run(code)


@pytest.mark.slow
def test_version_lists_each_extension() -> None:
    out = CliRunner().invoke(main, ["--version"]).output
    line = out.splitlines()[-1]
    if native.switched_off():  # (make test-no-native)
        assert line == "native extensions: all off (IM2REC_NO_NATIVE=1)"
    for ext in [] if native.switched_off() else native.extensions():
        assert f"{ext.name} {ext.state}" in line
    if native.load("jpeg") is not None:
        assert "jpeg on (libjpeg-turbo " in line
    off = run("from im2rec.cli import version_text; print(version_text())", IM2REC_NO_NATIVE="1")
    assert off.splitlines()[-1] == "native extensions: all off (IM2REC_NO_NATIVE=1)"
    assert "JPEG regions: Pillow" in off
