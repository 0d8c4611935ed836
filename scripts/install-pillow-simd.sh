#!/usr/bin/env bash
# Build Pillow-SIMD from source into a virtualenv, replacing plain Pillow.
# Usage: scripts/install-pillow-simd.sh VENV
set -euo pipefail
venv=${1:?usage: $0 VENV}
py="$venv/bin/python"

# The optional libraries whose codecs Pillow's own wheels carry, as
# pkg-config name:Pillow feature:Debian package (colour management, TIFF,
# WebP, JPEG 2000). Pillow's build uses each one it finds.
optional="lcms2:littlecms2:liblcms2-dev libtiff-4:libtiff:libtiff-dev libwebp:webp:libwebp-dev
libopenjp2:jpg_2000:libopenjp2-7-dev"
absent=""
for lib in $optional; do
    pkg-config --exists "${lib%%:*}" 2>/dev/null || absent="$absent ${lib##*:}"
done
if [ -n "$absent" ] && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    echo "Installing the libraries Pillow's codecs need:$absent"
    # shellcheck disable=SC2086
    apt-get install -y --no-install-recommends pkg-config $absent > /dev/null 2>&1 \
        || { apt-get update > /dev/null 2>&1 \
             && apt-get install -y --no-install-recommends pkg-config $absent > /dev/null 2>&1; } \
        || echo "warning: could not install$absent; Pillow-SIMD is built without those codecs"
fi

# Already built, with every codec whose library is here: nothing to do.
features=$(for lib in $optional; do
    rest=${lib#*:}
    pkg-config --exists "${lib%%:*}" 2>/dev/null && printf '%s ' "${rest%%:*}"
done)
if "$py" - "$features" <<'PY' 2>/dev/null; then
import sys, PIL
from importlib import metadata
from PIL import features
wanted = sys.argv[1].split()
sys.exit(0 if metadata.version("pillow-simd") == PIL.__version__
         and all(features.check(f) for f in wanted) else 1)
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
# pip may have taken a wheel it built before these libraries were here: then
# once more, built anew
if ! "$py" -c "import sys; from PIL import features; sys.exit(not all(map(features.check, sys.argv[1:])))" $features; then
    CC="$cc" "$py" -m pip install --no-binary pillow-simd --force-reinstall --no-deps --no-cache-dir \
        --quiet 'pillow-simd>=9.1'
fi
# Which of the codecs Pillow's wheels carry this build lacks (an image that
# needs one fails alone, listed in the pack's failure report): said now.
"$py" - <<'PY' || true
try:
    from im2rec.imaging.codec import backend_info
except ImportError:  # (im2rec is installed into this environment after Pillow)
    raise SystemExit(0)
missing = backend_info()["missing"]
needs = {"littlecms2": "liblcms2-dev", "libtiff": "libtiff-dev", "webp": "libwebp-dev",
         "jpg_2000": "libopenjp2-7-dev", "avif": "libavif-dev 1.0 or newer"}
if missing:
    said = ", ".join(f"{name} ({what}; needs {needs.get(name, '?')})"
                     for name, what in missing.items())
    print(f"note: Pillow-SIMD was built without {said}, which Pillow's wheels have; an image "
          "that needs one fails alone. With those Debian packages (or your system's), run "
          "'make install' again")
PY
