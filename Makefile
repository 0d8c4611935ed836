# im2rec development tasks. `make help` lists them.
PYTHON    ?= python3
MX_PYTHON ?= python3.11
VENV      := .venv
# where torch and torchvision come from: PyPI (a CUDA build), or e.g.
# TORCH_INDEX=https://download.pytorch.org/whl/cpu for PyTorch's CPU wheels
TORCH_INDEX ?=
MX_VENV   := .venv-mx
ALT_VENV  := .venv-np1
BIN       := $(VENV)/bin
PYTEST    := $(BIN)/python -m pytest

.DEFAULT_GOAL := help
.PHONY: help install ffcv stream-peers test test-fast test-no-native compat lint format bench demo golden clean matrix package wheel fuzz sanitize docs docs-serve charts lock

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-zA-Z_-]*:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.installed: pyproject.toml constraints/dev.txt scripts/install-pillow-simd.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	@# pinned by constraints/dev.txt (make lock): no resolver search, ~50 s instead of ~3 min
	$(BIN)/python -m pip install --quiet -c constraints/dev.txt -e '.[dev,dask,remote,docs,browse]'
	@# rec browse's browser test drives Debian's chromium (never a downloaded browser);
	@# where it cannot be installed, that test says so and is skipped
	@command -v chromium > /dev/null || apt-get install -y --no-install-recommends chromium > /dev/null \
		|| { apt-get update > /dev/null && apt-get install -y --no-install-recommends chromium > /dev/null; } \
		|| echo "chromium not installed: the rec browse page test will be skipped"
	@# The loader tests run a real torch DataLoader (skipped without torch), torchdata's
	@# StatefulDataLoader for the resume tests, and torchvision's tv_tensors and a detector
	@# for the detection tests. torchvision 0.29.1 loads only beside its own torch (2.14.1,
	@# a CUDA build that runs on the CPU); it is installed before Pillow-SIMD, since it
	@# asks for "pillow", which pip would otherwise install over Pillow-SIMD.
	$(BIN)/python -m pip install --quiet -c constraints/dev.txt $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX) --extra-index-url https://pypi.org/simple) 'torch==2.14.1' 'torchvision==0.29.1' 'torchdata==0.11.0' || echo "torch==2.14.1 not installed: the DataLoader tests will be skipped"
	@# The fast path: Pillow-SIMD built with AVX2 replaces the Pillow wheel pip installed.
	scripts/install-pillow-simd.sh $(VENV)
	@touch $@

# The optional C extensions (setup.py), rebuilt in place when their sources change.
$(VENV)/.native: $(VENV)/.installed setup.py $(wildcard im2rec/*/*.c im2rec/*/*.h im2rec/*/*/*.h im2rec/*.h)
	$(BIN)/python setup.py -q build_ext --inplace
	@# (optional in setup.py: fail here where one could be built and was not)
	$(BIN)/python scripts/check_native.py
	$(BIN)/python -m compileall -q im2rec  # bytecode now: rec starts ~30 ms sooner where none is written
	@touch $@

install: $(VENV)/.native ## Create .venv with im2rec (editable, C extensions built), Pillow-SIMD and dev tools

# Re-resolve the dev environment from pyproject.toml's ranges into
# constraints/dev.txt (run after changing a dependency; commit the result).
lock: ## Refresh constraints/dev.txt, the pinned versions make install uses
	rm -rf build/lock-venv
	$(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/python -m pip install --quiet --upgrade pip setuptools wheel
	build/lock-venv/bin/python -m pip install --quiet '.[dev,dask,remote,docs,browse]'
	{ sed -n '1,/^# Runtime/p' constraints/dev.txt; \
	  build/lock-venv/bin/python -m pip freeze --exclude-editable | grep -iv '^im2rec'; } > constraints/dev.txt.new
	mv constraints/dev.txt.new constraints/dev.txt
	rm -rf build/lock-venv

# The loader benchmark's strongest reference: NVIDIA DALI's CPU pipeline (no GPU needed).
$(VENV)/.dali: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet 'nvidia-dali-cuda120==2.4.0'
	@touch $@

# bench_annotations.py's reference: pycocotools' COCO() load of the same file.
$(VENV)/.pycocotools: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet 'pycocotools==2.0.11'
	@touch $@

# The loader benchmark's other CPU reference: FFCV 1.0.2, in its own venv (it
# wants numba and builds from source against OpenCV's and libjpeg-turbo's
# headers, found with `pkg-config opencv4 libturbojpeg`: Debian's packages,
# installed here when missing and allowed). A machine that cannot build it
# still runs every other row: bench_loader.py says FFCV is missing.
FFCV_VENV := .venv-ffcv
FFCV_PYTHON ?= python3.11
$(FFCV_VENV)/.installed: constraints/ffcv.txt
	@pkg-config --exists opencv4 libturbojpeg 2>/dev/null || apt-get install -y --no-install-recommends \
		libopencv-dev libturbojpeg0-dev pkg-config > /dev/null || { apt-get update > /dev/null \
		&& apt-get install -y --no-install-recommends libopencv-dev libturbojpeg0-dev pkg-config > /dev/null; }
	$(FFCV_PYTHON) -m venv $(FFCV_VENV)
	$(FFCV_VENV)/bin/python -m pip install --quiet -c constraints/ffcv.txt 'torch==2.13.0' numpy pillow 'ffcv==1.0.2'
	@touch $@

ffcv: $(FFCV_VENV)/.installed ## Build FFCV 1.0.2 into .venv-ffcv (bench_loader.py's FFCV rows)

# bench_stream.py's references: litdata and MosaicML Streaming, with im2rec
# (editable, Pillow-SIMD) for the same transform on their samples.
STREAM_VENV := .venv-stream
$(STREAM_VENV)/.installed: constraints/stream.txt $(VENV)/.native
	$(FFCV_PYTHON) -m venv $(STREAM_VENV)
	$(STREAM_VENV)/bin/python -m pip install --quiet -c constraints/stream.txt 'torch==2.13.0' \
		litdata mosaicml-streaming boto3 click rich numpy
	@# (torchvision comes with MosaicML's deps, and PyPI's build does not load beside
	@# this CPU torch; only MosaicML's vision dataset classes want it: not used)
	$(STREAM_VENV)/bin/python -m pip uninstall --yes --quiet torchvision
	scripts/install-pillow-simd.sh $(STREAM_VENV)
	$(STREAM_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

stream-peers: $(STREAM_VENV)/.installed ## litdata and MosaicML Streaming in .venv-stream (bench_stream.py)

test: $(VENV)/.native ## Run the test suite (all but the MXNet cross-checks), on every core
	$(PYTEST) -n auto -m "not compat"

# The quick loop while editing: no process, server, docs build or memory run
# (those are marked slow), under a minute on 2 cores; `make test` runs them all.
test-fast: $(VENV)/.native ## The tests that start no process or server and take no seconds (a quick loop)
	$(PYTEST) -n auto -m "not compat and not slow" -q

# The fallbacks, tested whole: every C extension switched off (im2rec.native).
test-no-native: $(VENV)/.native ## The whole suite again with IM2REC_NO_NATIVE=1 (the pure-Python paths)
	IM2REC_NO_NATIVE=1 $(PYTEST) -n auto -m "not compat"

# The reference: real MXNet 1.9.1, which imports only with numpy<1.24 (Python <= 3.11).
$(MX_VENV)/.installed:
	@command -v $(MX_PYTHON) >/dev/null || { echo "make compat needs $(MX_PYTHON) for mxnet==1.9.1 (set MX_PYTHON=...)"; exit 1; }
	$(MX_PYTHON) -m venv $(MX_VENV)
	$(MX_VENV)/bin/python -m pip install --quiet 'mxnet==1.9.1' 'numpy<1.24' 'opencv-python-headless==4.11.0.86'
	@# for bench_loader.py: the usual mx.recordio + PIL dataset under a torch DataLoader
	$(MX_VENV)/bin/python -m pip install --quiet pillow 'torch==2.13.0' || echo "no torch in $(MX_VENV): bench_loader.py cannot run"
	@# GluonCV's own VOC and COCO readers, which `rec list --boxes --convention gluoncv` is
	@# checked against (its wheel asks for opencv-python, which the headless build stands for)
	$(MX_VENV)/bin/python -m pip install --quiet 'numpy<1.24' tqdm matplotlib portalocker scipy yacs pandas pyyaml autocfg pycocotools
	$(MX_VENV)/bin/python -m pip install --quiet --no-deps 'gluoncv==0.10.5.post0'
	@touch $@

# numpy 1.x with plain Pillow: the other end of what we support.
$(ALT_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(ALT_VENV)
	$(ALT_VENV)/bin/python -m pip install --quiet 'numpy>=1.24,<2' pillow click rich tqdm pytest hypothesis
	$(ALT_VENV)/bin/python -m pip install --quiet --no-deps -e .
	@touch $@

compat: $(VENV)/.native $(MX_VENV)/.installed $(ALT_VENV)/.installed ## Cross-check against MXNet 1.9.1; re-run the suite on numpy 1.x + plain Pillow
	IM2REC_MXNET_PYTHON=$(MX_VENV)/bin/python $(PYTEST) -m compat
	$(ALT_VENV)/bin/python -m pytest -m "not compat" -q

# The dependency bounds, tested: the lowest versions pyproject.toml allows on
# the oldest Python, and the newest of everything on the newest Python.
PY310 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python) $(shell command -v python3.10))
PY313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13.*/bin/python) $(shell command -v python3.13))
LOWEST := click==8.1.0 numpy==1.24.0 pillow==10.1.0 rich==13.0.0 tqdm==4.60.0
TEST_TOOLS := pytest hypothesis

.venv-lowest/.installed: pyproject.toml
	@test -n "$(PY310)" || { echo "make matrix needs Python 3.10 (set PY310=...)"; exit 1; }
	$(PY310) -m venv .venv-lowest
	.venv-lowest/bin/python -m pip install --quiet -e . $(LOWEST) $(TEST_TOOLS)
	@touch $@

.venv-newest/.installed: pyproject.toml
	@test -n "$(PY313)" || { echo "make matrix needs Python 3.13 (set PY313=...)"; exit 1; }
	$(PY313) -m venv .venv-newest
	.venv-newest/bin/python -m pip install --quiet --upgrade -e . $(TEST_TOOLS)
	@touch $@

matrix: .venv-lowest/.installed .venv-newest/.installed ## The suite on Python 3.10 with the lowest deps and on 3.13 with the newest
	.venv-lowest/bin/python -m pip list --format=freeze | grep -iE '^(click|numpy|pillow|rich|tqdm)=='
	.venv-lowest/bin/python -m pytest -m "not compat" -q -p no:cacheprovider
	.venv-newest/bin/python -m pip list --format=freeze | grep -iE '^(click|numpy|pillow|rich|tqdm)=='
	.venv-newest/bin/python -m pytest -m "not compat" -q -p no:cacheprovider

package: ## Build sdist + wheel, twine check, and a no-compiler install beside a preinstalled Pillow
	scripts/check-package.sh $(PYTHON)

# A release wheel for this platform: every C extension, libjpeg bundled by
# auditwheel (manylinux), then installed and run in a fresh venv with no
# compiler and no libjpeg headers. Other platforms: .github/workflows/release.yml.
wheel: ## Build dist/wheelhouse/im2rec-*-manylinux*.whl with the fast path, and check it in a clean venv
	scripts/build-wheel.sh $(PYTHON)

lint: $(VENV)/.native ## ruff (lint + format check), mypy --strict, the import layers (lint-imports)
	$(BIN)/ruff check im2rec tests bench fuzz
	$(BIN)/ruff format --check im2rec tests bench fuzz
	$(BIN)/mypy
	$(BIN)/lint-imports
	@# docs/cli.md is what the commands' --help print (scripts/docs_cli.py writes it)
	$(BIN)/python scripts/docs_cli.py --check

# The documentation site (mkdocs.yml), built by Zensical, the maintained successor
# of Material for MkDocs (whose end of life is May 2027), from the same config:
# strict, so a broken link, anchor or reference fails.
docs: $(VENV)/.native ## Build the documentation site (docs/, Zensical) into build/site, strict
	$(BIN)/zensical build --strict

docs-serve: $(VENV)/.native ## Preview the documentation site at http://127.0.0.1:8000
	$(BIN)/zensical serve

format: $(VENV)/.installed ## Apply ruff's formatting and safe fixes
	$(BIN)/ruff check --fix im2rec tests bench fuzz
	$(BIN)/ruff format im2rec tests bench fuzz

# Those that run the MXNet reference get its interpreter.
MX_BENCHES := bench_recordio.py bench_list.py bench_pack.py bench_loader.py bench_detection.py bench_scale.py
OWN_BENCHES := bench_browse.py bench_annotations.py bench_inspect.py bench_distributed.py bench_imagenet.py bench_remote.py bench_convert.py bench_parquet.py bench_mixture.py bench_stream.py bench_native.py

# Every benchmark runs (a miss does not hide the others' numbers); the target
# fails at the end if any missed a live target or its outputs differed.
bench: $(VENV)/.native $(VENV)/.dali $(VENV)/.pycocotools $(MX_VENV)/.installed ## Benchmarks beside their references: ratios printed, saved as JSON, drawn; fails on a miss
	@$(MAKE) --no-print-directory ffcv || echo "FFCV could not be built here: bench_loader.py runs without it"
	@$(MAKE) --no-print-directory stream-peers || echo "no litdata/MosaicML here: bench_stream.py runs without them"
	@$(BIN)/python -m compileall -q im2rec  # bytecode, as an installed wheel has (see benchutil)
	@failed=""; \
	for b in $(MX_BENCHES) $(OWN_BENCHES); do \
		echo "== $$b"; \
		case " $(MX_BENCHES) " in *" $$b "*) args="--mx-python $(MX_VENV)/bin/python";; *) args="";; esac; \
		[ $$b = bench_loader.py ] && args="$$args --ffcv-python $(FFCV_VENV)/bin/python"; \
		$(BIN)/python bench/$$b $$args || failed="$$failed $$b"; \
	done; \
	$(BIN)/python bench/charts.py; \
	$(BIN)/python bench/report.py; \
	if [ -n "$$failed" ]; then echo "missed a target or differed:$$failed"; exit 1; fi; \
	echo "every benchmark met its targets"

# Each benchmark writes bench/results/NAME.json (its ratios and all it
# measured); these draw them, and write docs/performance.md's tables.
charts: ## Draw docs/img/*.svg and write docs/performance.md's tables from bench/results/*.json
	$(BIN)/python bench/charts.py
	$(BIN)/python bench/report.py

# Coverage-guided fuzzing of the C extensions and the file parsers (fuzz/):
# atheris, the libFuzzer engine for Python, with its ASan runtime.
FUZZ_SECONDS ?= 30
$(VENV)/.atheris: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet 'atheris==3.0.0'
	@touch $@

fuzz: $(VENV)/.native $(VENV)/.atheris ## Run every fuzz harness for FUZZ_SECONDS (30) each (ASan build)
	scripts/sanitize.sh $(BIN)/python $(FUZZ_SECONDS) --fuzz-only

sanitize: $(VENV)/.native $(VENV)/.atheris ## C extensions under ASan+UBSan (GCC, then clang): native tests + a short fuzz pass
	scripts/sanitize.sh $(BIN)/python $(or $(SANITIZE_FUZZ_SECONDS),10)

golden: $(MX_VENV)/.installed ## Regenerate tests/golden with real MXNet
	$(MX_VENV)/bin/python tests/golden/make_golden.py tests/golden

DEMO := build/demo

demo: $(VENV)/.native ## List and pack the bundled examples/ images end to end (in build/demo)
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	cd $(DEMO) && $(CURDIR)/$(BIN)/rec list $(CURDIR)/examples/example --recursive
	cd $(DEMO) && $(CURDIR)/$(BIN)/rec pack --pass-through --pack-label --num-workers 2
	$(BIN)/python examples/recordio_quickstart.py $(DEMO)

clean: ## Remove virtualenvs, caches and build files
	rm -rf $(VENV) $(MX_VENV) $(ALT_VENV) .venv-lowest .venv-newest dist .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
