#!/usr/bin/env bash
# The C extensions built with AddressSanitizer and UndefinedBehaviorSanitizer
# (clang), in a copy of the package under build/sanitize; then the tests of
# the native code and a short fuzz pass run against that copy, with every
# Python object allocated by malloc (PYTHONMALLOC=malloc), so that a read
# or write one byte past any buffer stops the run with a report.
#
#   scripts/sanitize.sh PYTHON [FUZZ_SECONDS_EACH] [--fuzz-only]
#
# --fuzz-only (make fuzz) skips the tests: the fuzzers need this build too,
# as its -fsanitize=fuzzer-no-link gives libFuzzer the C code's coverage
# (without it the C entry points would be fuzzed blind).
#
# Needs clang (CLANG=..., else clang or clang-14 on PATH) and atheris in
# PYTHON's environment, whose libFuzzer+ASan runtime is preloaded.
set -euo pipefail
python=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute, not resolved: a venv's python is a link
seconds=${2:-10}
mode=${3:-}
clang=${CLANG:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$clang" ]; then
	echo "make sanitize needs clang (apt-get install clang-14 libclang-rt-14-dev)"
	exit 1
fi
out=build/sanitize
rm -rf "$out"
mkdir -p "$out"
cp -r im2rec tests fuzz setup.py pyproject.toml "$out/"
find "$out/im2rec" \( -name '*.so' -o -name '*.pyc' \) -delete
san="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
(cd "$out" && CC="$clang" LDSHARED="$clang -shared" CFLAGS="$san" LDFLAGS="$san" \
	"$python" setup.py -q build_ext --inplace > build.log 2>&1) || { tail -30 "$out/build.log"; exit 1; }
# every extension is optional in a normal install: here each one must exist
for ext in imaging/_jpeg imaging/_tensor recordio/_words storage/_copies formats/_ustar; do
	ls "$out"/im2rec/$ext.*.so > /dev/null || { echo "$ext was not built; see $out/build.log"; exit 1; }
done
runtime=$("$python" -c "import atheris, os; print(os.path.join(os.path.dirname(os.path.dirname(atheris.__file__)), 'asan_with_fuzzer.so'))")
export LD_PRELOAD=$runtime PYTHONMALLOC=malloc
# leaks: CPython keeps objects for the life of the process by design
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$out"
"$python" -c "import im2rec.imaging._jpeg as m; assert m.__file__.startswith('$PWD'), m.__file__"
if [ "$mode" != "--fuzz-only" ]; then
echo "== the native-code tests under ASan + UBSan"
"$python" -m pytest -q -p no:cacheprovider -m "not compat" \
	tests/imaging/test_native_safety.py tests/imaging/test_decoding.py tests/training/test_fused.py tests/training/test_crop_native.py tests/training/test_batch_native.py tests/imaging/test_resample.py \
	tests/recordio/test_framing.py tests/recordio/test_chunks.py tests/formats/test_wds_import.py \
	tests/formats/test_webdataset.py tests/recordio/test_writer.py tests/imaging/test_image_headers.py
fi
echo "== fuzzing under ASan + UBSan"
cd - > /dev/null
scripts/fuzz.sh "$python" "$seconds" "$out"
