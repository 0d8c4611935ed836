#!/usr/bin/env bash
# The package as users get it: build the sdist and the wheel, check them with
# twine, then install the way a user would, into environments that already
# have plain Pillow (as PyTorch/torchvision ones do), with no C compiler
# (CC=/bin/false) and no pip cache: the wheel, and the checkout itself. Each
# must keep Pillow working, leave `pip check` clean, and run rec list / pack
# / verify. Usage: scripts/check-package.sh [PYTHON]
set -euo pipefail
py=${1:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== build and twine check"
"$py" -m venv "$work/tools"
"$work/tools/bin/python" -m pip install --quiet build twine
rm -rf "$root/dist"
"$work/tools/bin/python" -m build --quiet --outdir "$root/dist" "$root" >/dev/null
"$work/tools/bin/python" -m twine check --strict "$root"/dist/*
"$work/tools/bin/python" - "$root"/dist/*.tar.gz "$root"/dist/*.whl <<'PY'
import sys, tarfile, zipfile
sdist, wheel = sys.argv[1:]
names = tarfile.open(sdist).getnames()
assert any(n.endswith("/LICENSE") for n in names), "the sdist has no LICENSE"
assert not any("/tests/" in n for n in names), "the sdist ships tests it cannot run"
inside = zipfile.ZipFile(wheel).namelist()
assert any(n.endswith("licenses/LICENSE") for n in inside), "the wheel has no LICENSE"
assert "im2rec/py.typed" in inside and "im2rec/imagenet/val_map.bin" in inside
print(f"sdist: {len(names)} files, no tests; wheel: {len(inside)} files; LICENSE in both")
PY

smoke() {  # VENV: rec list / pack / verify on the bundled examples
    local venv=$1 out="$work/smoke-$(basename "$1")"
    mkdir -p "$out"
    (cd "$out" && "$venv/bin/rec" list "$root/examples/example" --recursive -o ex -q \
        && "$venv/bin/rec" pack ex.lst --pass-through --root "$root/examples/example" -q \
        && "$venv/bin/rec" verify ex.rec --decode)
    "$venv/bin/rec" --version
}

for what in wheel checkout; do
    echo "== no-compiler install of the $what beside a preinstalled Pillow"
    venv="$work/user-$what"
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet pillow
    before=$("$venv/bin/python" -c "import PIL; print(PIL.__version__)")
    if [ "$what" = wheel ]; then
        source=$(echo "$root"/dist/*.whl)
    else  # the files a clone has (not extensions built in place here)
        source="$work/src"
        mkdir -p "$source"
        git -C "$root" ls-files -co --exclude-standard -z \
            | tar -C "$root" --null -T - -cf - | tar -C "$source" -xf -
    fi
    CC=/bin/false CXX=/bin/false "$venv/bin/python" -m pip install --quiet --no-cache-dir "$source"
    "$venv/bin/python" -m pip check
    after=$("$venv/bin/python" -c "from PIL import Image, features; print(Image.__version__)")
    [ "$before" = "$after" ] || { echo "Pillow changed from $before to $after" >&2; exit 1; }
    smoke "$venv"
    # the wheel was built with a compiler; the checkout could not build the
    # region decoder and must fall back to Pillow
    want=$([ "$what" = wheel ] && echo "JPEG regions: libjpeg-turbo" || echo "JPEG regions: Pillow")
    "$venv/bin/rec" --version | grep -q "$want" || { echo "expected '$want'" >&2; exit 1; }
done
echo "package checks passed"
