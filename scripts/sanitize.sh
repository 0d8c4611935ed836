#!/usr/bin/env bash
# The C extensions built with AddressSanitizer and UndefinedBehaviorSanitizer
# in a copy of the package, then the tests of the native code run against
# that copy, with every Python object allocated by malloc (PYTHONMALLOC=
# malloc), so that a read or write one byte past any buffer stops the run
# with a report. Twice: with GCC, the compiler `make install` and most users
# build with (its UBSan also reports what clang's does not, e.g. a double
# stored through an unaligned pointer), in build/sanitize-gcc; then with
# clang, in build/sanitize, followed by a short fuzz pass (libFuzzer is
# clang's).
#
#   scripts/sanitize.sh PYTHON [FUZZ_SECONDS_EACH] [--fuzz-only]
#
# --fuzz-only (make fuzz) skips the tests and the GCC build: the fuzzers
# need the clang build, as its -fsanitize=fuzzer-no-link gives libFuzzer the
# C code's coverage (without it the C entry points would be fuzzed blind).
#
# Needs gcc with its libasan (CC_GCC=..., else gcc), clang (CLANG=..., else
# clang or clang-14 on PATH) and atheris in PYTHON's environment, whose
# libFuzzer+ASan runtime is preloaded for the clang build.
set -euo pipefail
python=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute, not resolved: a venv's python is a link
seconds=${2:-10}
mode=${3:-}
clang=${CLANG:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$clang" ]; then
	echo "make sanitize needs clang (apt-get install clang-14 libclang-rt-14-dev)"
	exit 1
fi
# (--capture=sys: a sanitizer's report goes to the real stderr; captured
# at the file-descriptor level it would die with the process, unread)
tests=(tests/imaging/test_native_safety.py tests/imaging/test_regions.py tests/imaging/test_jpeg.py
	tests/training/augment/test_fused.py tests/training/test_crop_native.py tests/training/test_filling.py
	tests/imaging/test_resample.py tests/recordio/test_framing.py tests/recordio/test_chunks.py
	tests/formats/test_wds_import.py tests/formats/test_webdataset.py tests/formats/test_tars.py
	tests/recordio/test_writer.py tests/recordio/test_output.py tests/storage/test_copying.py
	tests/imaging/test_headers.py tests/listing/test_jsoncolumns.py tests/recordio/test_blocks.py
	tests/inspect/test_blockwise.py)

# build OUT CC FLAGS: a copy of the package in OUT with its extensions built
# by CC with FLAGS, every one of them (each is optional in a normal install)
build() {
	local out=$1 cc=$2 flags=$3
	rm -rf "$out"
	mkdir -p "$out"
	cp -r im2rec tests fuzz setup.py pyproject.toml "$out/"
	find "$out/im2rec" \( -name '*.so' -o -name '*.pyc' \) -delete
	(cd "$out" && CC="$cc" LDSHARED="$cc -shared" CFLAGS="$flags" LDFLAGS="$flags" \
		"$python" setup.py -q build_ext --inplace > build.log 2>&1) || { tail -30 "$out/build.log"; exit 1; }
	for ext in imaging/_jpeg imaging/_tensor recordio/_words listing/_text; do
		ls "$out"/im2rec/$ext.*.so > /dev/null || { echo "$ext was not built by $cc; see $out/build.log"; exit 1; }
	done
}

# leaks: CPython keeps objects for the life of the process by design
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if [ "$mode" != "--fuzz-only" ]; then
	gcc=${CC_GCC:-$(command -v gcc || true)}
	asan=$([ -n "$gcc" ] && "$gcc" -print-file-name=libasan.so || true)
	if [ -z "$gcc" ] || [ ! -e "$asan" ]; then
		echo "make sanitize needs gcc and its AddressSanitizer runtime (apt-get install gcc libasan8)"
		exit 1
	fi
	echo "== the native-code tests under ASan + UBSan, built by $("$gcc" -dumpfullversion | sed 's/^/gcc /')"
	build build/sanitize-gcc "$gcc" "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
	(cd build/sanitize-gcc && LD_PRELOAD=$asan PYTHONMALLOC=malloc "$python" -c \
		"import im2rec.imaging._jpeg as m; assert m.__file__.startswith('$PWD/'), m.__file__" \
		&& LD_PRELOAD=$asan PYTHONMALLOC=malloc "$python" -m pytest -q -p no:cacheprovider --capture=sys -m "not compat" "${tests[@]}")
fi

out=build/sanitize
san="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
build "$out" "$clang" "$san"
runtime=$("$python" -c "import atheris, os; print(os.path.join(os.path.dirname(os.path.dirname(atheris.__file__)), 'asan_with_fuzzer.so'))")
export LD_PRELOAD=$runtime PYTHONMALLOC=malloc
cd "$out"
"$python" -c "import im2rec.imaging._jpeg as m; assert m.__file__.startswith('$PWD'), m.__file__"
if [ "$mode" != "--fuzz-only" ]; then
echo "== the native-code tests under ASan + UBSan, built by clang"
"$python" -m pytest -q -p no:cacheprovider --capture=sys -m "not compat" "${tests[@]}"
fi
echo "== fuzzing under ASan + UBSan"
cd - > /dev/null
scripts/fuzz.sh "$python" "$seconds" "$out"
