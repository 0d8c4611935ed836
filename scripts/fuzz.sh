#!/usr/bin/env bash
# Runs every coverage-guided fuzz harness (fuzz/fuzz_*.py, atheris) for a
# bounded time each, from the committed seeds (fuzz/corpus/NAME, read only)
# plus a working corpus that grows in build/fuzz/NAME. Any crash, uncaught
# exception or sanitizer report fails the run; the input that caused it is
# kept in build/fuzz/artifacts/.
#
#   scripts/fuzz.sh PYTHON [SECONDS_EACH] [ROOT]
#
# ROOT (default .) holds im2rec/ and fuzz/: scripts/sanitize.sh points it at
# its instrumented build. libFuzzer options can be added with FUZZ_OPTIONS.
set -euo pipefail
python=$1
seconds=${2:-30}
root=${3:-.}
cd "$root"
mkdir -p build/fuzz/artifacts
failed=""
for harness in fuzz/fuzz_*.py; do
	name=$(basename "$harness" .py)
	name=${name#fuzz_}
	work=build/fuzz/$name
	mkdir -p "$work"
	echo "== fuzz $name (${seconds}s)"
	# -rss_limit_mb: a parser that allocates what an input claims fails here
	if ! PYTHONPATH=. "$python" "$harness" "$work" "fuzz/corpus/$name" \
		-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 \
		-artifact_prefix="build/fuzz/artifacts/$name-" -print_final_stats=1 \
		${FUZZ_OPTIONS:-} > "build/fuzz/$name.log" 2>&1; then
		tail -40 "build/fuzz/$name.log"
		failed="$failed $name"
	else
		grep -E "^Done|stat::number_of_executed_units" "build/fuzz/$name.log" | head -1
	fi
done
if [ -n "$failed" ]; then
	echo "fuzzing found a failure in:$failed (inputs in $root/build/fuzz/artifacts)"
	exit 1
fi
echo "every fuzz harness ran ${seconds}s without a failure"
