#!/usr/bin/env bash
# The release wheels' libjpeg-turbo, built from source in cibuildwheel's
# manylinux containers (their system one is old or absent) and installed
# into /usr/local, where setup.py's build finds it and auditwheel bundles
# it into the wheel (im2rec.libs/). Run by cibuildwheel's before-all on
# Linux (pyproject.toml, [tool.cibuildwheel.linux]).
set -euo pipefail
version=${LIBJPEG_TURBO_VERSION:-3.1.2}
work=$(mktemp -d)
curl -fsSL "https://github.com/libjpeg-turbo/libjpeg-turbo/releases/download/$version/libjpeg-turbo-$version.tar.gz" \
    | tar -xz -C "$work"
cmake -S "$work/libjpeg-turbo-$version" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=/usr/local -DCMAKE_INSTALL_LIBDIR=lib -DENABLE_STATIC=OFF \
    -DWITH_TURBOJPEG=OFF -DWITH_JPEG8=OFF > /dev/null
cmake --build "$work/build" --parallel --target install > /dev/null
ldconfig 2>/dev/null || true
echo "libjpeg-turbo $version in /usr/local/lib"
