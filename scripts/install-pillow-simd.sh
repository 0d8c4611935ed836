#!/usr/bin/env bash
# Build Pillow-SIMD from source into a virtualenv, replacing plain Pillow.
# Usage: scripts/install-pillow-simd.sh VENV
set -euo pipefail
venv=${1:?usage: $0 VENV}
py="$venv/bin/python"

if "$py" - <<'PY' 2>/dev/null; then
import sys, PIL
from importlib import metadata
sys.exit(0 if metadata.version("pillow-simd") == PIL.__version__ else 1)
PY
    echo "Pillow-SIMD is already installed in $venv"
    exit 0
fi

cc=${CC:-cc}
missing=""
for header in jpeglib.h zlib.h; do
    if ! printf '#include <stdio.h>\n#include <%s>\nint main(void) { return 0; }\n' "$header" \
        | $cc -x c - -o /dev/null >/dev/null 2>&1; then
        missing="$missing $header"
    fi
done
if [ -n "$missing" ]; then
    cat >&2 <<MSG
error: cannot build Pillow-SIMD: the C headers${missing} were not found (compiler: $cc).
Install the libjpeg and zlib development packages, then run 'make install' again:
  Debian/Ubuntu:  sudo apt-get install build-essential libjpeg-dev zlib1g-dev
  Fedora/RHEL:    sudo dnf install gcc libjpeg-turbo-devel zlib-devel
  macOS:          brew install jpeg-turbo zlib
(im2rec also runs on plain Pillow, only slower: $venv/bin/pip install pillow)
MSG
    exit 1
fi

# AVX2 kernels make resizing and colour conversion several times faster.
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    cc="$cc -mavx2"
fi
echo "Building Pillow-SIMD with CC='$cc' (a minute or two; pip caches the wheel)"
"$py" -m pip uninstall --yes --quiet pillow >/dev/null 2>&1 || true
log=$(mktemp)
if ! CC="$cc" "$py" -m pip install --no-binary pillow-simd --force-reinstall --no-deps \
        'pillow-simd>=9.1' >"$log" 2>&1; then
    tail -n 25 "$log" >&2
    cat >&2 <<MSG
error: building Pillow-SIMD failed (full log: $log).
Usual causes: missing libjpeg/zlib headers or no C compiler (see above); install them and
run 'make install' again. Plain Pillow also works: $venv/bin/pip install pillow
MSG
    exit 1
fi
rm -f "$log"
