# Set-up is part of every target: a fresh machine needs only Python 3.10+ and these commands.
PYTHON ?= python3
VENV ?= .venv
# An environment that already has torch is used as it is, with no venv made and nothing installed (no
# network): an active virtualenv (`. /opt/torch/.venv/bin/activate && make test`) or `make test
# PYTHON=/opt/torch/.venv/bin/python`; fp8check then runs from this checkout (PYTHONPATH). VENV=DIR
# names a venv to set up as below instead.
ENV_PY := $(if $(filter command line environment,$(origin VENV)),,$(if $(filter command line environment,$(origin PYTHON)),$(PYTHON),$(if $(VIRTUAL_ENV),$(VIRTUAL_ENV)/bin/python)))
ifneq ($(ENV_PY),)
PY := $(ENV_PY)
STAMP := env-check
FP8CHECK := $(PY) -m fp8check
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
else
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fp8check-installed
FP8CHECK := $(VENV)/bin/fp8check
endif

.PHONY: env-check compare test test-install test-triton-matrix torch-plan gate gate-gpu bench table parity doctor clean vllm-wheel-table ecosystem aiter-src-table corpus-sources corpus-test corpus-gpu mutation docs-picture

# Which torch build: the machine decides, TORCH_INDEX=cpu|cu126|cu128|rocm6.4|... overrides. No NVIDIA or
# AMD GPU here: PyTorch's CPU-only index and a `+cpu` pin, so no CUDA package is ever downloaded (a plain
# `torch` from PyPI is the CUDA build plus ~18 nvidia packages). pypi: PyPI's own torch, as pip resolves it.
# An environment that already has torch keeps it; local wheels (pip's find-links) still win.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?= $(shell if nvidia-smi -L >/dev/null 2>&1; then echo pypi; \
	elif [ -e /dev/kfd ] || rocminfo >/dev/null 2>&1; then echo rocm6.4; else echo cpu; fi)
TORCH_PIN := torch==$(TORCH_VERSION)$(if $(filter pypi,$(TORCH_INDEX)),,+$(TORCH_INDEX))
TORCH_SPEC := $(TORCH_PIN)$(if $(filter pypi,$(TORCH_INDEX)),, --extra-index-url https://download.pytorch.org/whl/$(TORCH_INDEX))

$(VENV)/.fp8check-installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# the pinned build from where pip already looks (a local wheel store), else from PyTorch's index
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_PIN) 2>/dev/null \
	  || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e '.[test]'
	# aiter-src (aiter's C++ op built for the CPU) needs clang >= 20; its tests skip without one. Where
	# none is found and apt-get can install (root on Debian: clang-22 from bookworm-security), it does.
	$(PY) -c "from fp8check.hip_cpu.compiler import find; raise SystemExit(find() is None)" \
	  || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -q >/dev/null \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang-22 >/dev/null; } \
	  || echo "no clang >= 20: the aiter-src tests will be skipped"
	# The HTML report's browser tests drive the system's Chromium (tests/browser.py); where none is found and
	# apt-get can install (root on Debian), it does.
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
	  || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -q >/dev/null \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } \
	  || echo "no Chromium: the HTML report's browser tests will be skipped"
	touch $(VENV)/.fp8check-installed

# The environment as it is: what fp8check needs must import (nothing is installed into it).
env-check:
	@$(PY) -c "import sys, torch, click, rich, safetensors, numpy; print('using', sys.executable, 'as it is: torch', torch.__version__)" \
	  || { echo "$(PY) lacks what fp8check needs (torch, click, rich, safetensors, numpy): install them, or leave PYTHON unset to set up $(VENV)"; exit 2; }

# What the set-up would install for torch here, installing nothing (pip's dry-run report; no nvidia-* on a CPU machine).
torch-plan:
	$(PYTHON) -m pip install --dry-run --ignore-installed --quiet --report - $(TORCH_SPEC) \
	  | $(PYTHON) -c "import json, sys; print('\n'.join(i['metadata']['name'] + ' ' + i['metadata']['version'] for i in json.load(sys.stdin)['install']))"

# The suite against the oldest and the newest supported Triton (docs/install.md: "Supported versions"), each in a
# venv of its own beside $(VENV), with the same torch build.
TRITON_MATRIX ?= 3.6.0 3.9.0
test-triton-matrix:
	set -e; for v in $(TRITON_MATRIX); do \
	  test -x .venv-triton-$$v/bin/python || $(PYTHON) -m venv .venv-triton-$$v; \
	  .venv-triton-$$v/bin/python -m pip install -q $(TORCH_PIN) triton==$$v 2>/dev/null \
	    || .venv-triton-$$v/bin/python -m pip install -q $(TORCH_SPEC) triton==$$v; \
	  .venv-triton-$$v/bin/python -m pip install -q -e '.[test]' triton==$$v; \
	  .venv-triton-$$v/bin/python -m pytest -n auto -p no:cacheprovider; \
	done

compare: $(STAMP)
	$(FP8CHECK) compare --block 64 --head-dim 128

table: $(STAMP)
	$(FP8CHECK) table --config seed-table

parity: $(STAMP)
	$(FP8CHECK) parity --config seed-parity

doctor: $(STAMP)
	$(FP8CHECK) doctor

test: $(STAMP)
	$(PY) -m pytest -n auto

# A non-editable install into a fresh venv, fp8check run from another folder (.ci/test-install).
test-install: $(STAMP)
	.ci/test-install $(PY)

gate: $(STAMP)
	$(FP8CHECK) gate configs/ci.toml

gate-gpu: $(STAMP)
	$(FP8CHECK) gate configs/gpu.toml --device cuda

# Every case of bench/cases.py on this machine's CPU, each figure printed with its target (a few
# minutes); then the exact interpreter's cost per program. On a GPU: `$(PY) bench/run.py --device cuda`.
bench: $(STAMP)
	$(PY) bench/run.py
	$(PY) bench/interpreter.py

# Not part of `make test`: downloads vLLM's released wheel (no dependencies, about 336 MB, once) and runs
# the seed table on its real writer file, on this machine. The pre-fix copy is the same file without the
# one-line fix (`.view(FP8_DTYPE)` on the value slice).
VLLM_VERSION ?= 0.33.0
VLLM_OPS := vllm/v1/attention/ops/rocm_aiter_mla_sparse.py
VLLM_DIR := .cache/vllm-$(VLLM_VERSION)
vllm-wheel-table: $(STAMP)
	test -f $(VLLM_DIR)/$(VLLM_OPS) || ( $(PY) -m pip download -q --no-deps vllm==$(VLLM_VERSION) -d $(VLLM_DIR) \
	  && $(PY) -c "import glob, zipfile; zipfile.ZipFile(glob.glob('$(VLLM_DIR)/vllm-*.whl')[0]).extract('$(VLLM_OPS)', '$(VLLM_DIR)')" )
	sed 's/\[:, : block_size \* head_dim\]\.view(FP8_DTYPE)$$/[:, : block_size * head_dim]/' $(VLLM_DIR)/$(VLLM_OPS) > $(VLLM_DIR)/pre-fix.py
	! cmp -s $(VLLM_DIR)/$(VLLM_OPS) $(VLLM_DIR)/pre-fix.py
	$(FP8CHECK) table --buggy vllm-file:$(VLLM_DIR)/pre-fix.py --fixed vllm-file:$(VLLM_DIR)/$(VLLM_OPS)

# Not part of `make test`: aiter's real C++ op built for the CPU from an aiter source (`aiter-src:`) against
# `reference` (every case must be IDENTICAL), then the seed's Triton columns. AITER_SRC: an aiter checkout
# or an unpacked amd-aiter wheel's aiter_meta/ folder; without it, the released wheel (downloaded by pip
# without dependencies into fp8check's cache folder, once).
AITER_VERSION ?= 0.1.7.post2.dev18
AITER_SRC ?= pkg:amd-aiter==$(AITER_VERSION)
aiter-src-table: $(STAMP)
	$(PY) bench/aiter_src_table.py $(AITER_SRC) --candidates reference --slots sequential,shuffled,padded,sparse --expect-identical
	$(PY) bench/aiter_src_table.py $(AITER_SRC) --candidates reference --inputs specials,mixed --specials-inf-nan --expect-identical
	$(PY) bench/aiter_src_table.py $(AITER_SRC) --candidates triton,triton-buggy --inputs normal

# Not part of `make test`: mutation testing of fp8check's Triton writer, vLLM 0.33.0's writer file and
# SGLang 0.5.23's preset writer (both read from their pinned wheels, downloaded without dependencies into
# fp8check's cache folder, once), docs/MUTATION.md. MUTANTS: at most that many per writer (empty: all).
MUTANTS ?= 30
mutation: $(STAMP)
	$(PY) bench/mutation.py $(if $(MUTANTS),--limit $(MUTANTS)) --json out/mutation.json --markdown out/mutation.md

# Not part of `make test`: the picture of the HTML report in README.md and docs/html.md, drawn again from
# this tree (needs Chromium and Playwright, as the browser tests do).
docs-picture: $(STAMP)
	mkdir -p build
	$(FP8CHECK) compare --baseline reference --candidate file:tests/faults/transposed_tile.py:writer --quiet \
	  --html build/transposed-tile.html; test $$? -eq 1
	$(PY) tests/browser.py build/transposed-tile.html docs/html-transposed-tile.png

clean:
	rm -rf $(VENV) .venv-triton-* .pytest_cache .hypothesis *.egg-info

# Not part of `make test`: the ecosystem matrix on this machine. fp8check downloads each project's released
# wheel without dependencies (pinned hashes, fp8check/code/projects/*.toml) into its cache folder, once; FlagGems'
# writer and reader are only in its repository, so a clone at FLAGGEMS_REV goes to .cache/ (once).
FLAGGEMS_REV ?= ed2508bcb
FLAGGEMS_DIR := .cache/flaggems
ecosystem: $(STAMP)
	test -d $(FLAGGEMS_DIR) || git clone -q https://github.com/flagos-ai/FlagGems $(FLAGGEMS_DIR)
	git -C $(FLAGGEMS_DIR) checkout -q $(FLAGGEMS_REV)
	$(FP8CHECK) gate ecosystem --checkout flaggems=$(FLAGGEMS_DIR)

# The compiled-truth corpus (docs/NUMERICS.md, tests/corpus/). corpus-test: the released writers' pinned
# wheels into .cache/wheels and FlagGems at FLAGGEMS_REV, then every golden replayed on the CPU (the suite
# itself never downloads: without them it replays fp8check's own writer only). corpus-gpu: record the
# corpus again, on a machine with an NVIDIA GPU.
CORPUS_WHEELS := .cache/wheels
corpus-sources: $(STAMP)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --implementation cp --python-version 3.11 \
	  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 -d $(CORPUS_WHEELS) \
	  vllm==0.33.0 sglang==0.5.23 lmdeploy==0.18.0 flag-gems==5.0.2
	test -d $(FLAGGEMS_DIR) || git clone -q https://github.com/flagos-ai/FlagGems $(FLAGGEMS_DIR)
	git -C $(FLAGGEMS_DIR) checkout -q $(FLAGGEMS_REV)

corpus-test: corpus-sources
	# --opt=VALUE: pytest reads a bare VALUE after an option it does not know yet as a folder to load
	# conftests from (FlagGems' own, which needs its test requirements)
	$(PY) -m pytest -n auto -p no:cacheprovider tests/test_compiled_corpus.py --wheels=$(CORPUS_WHEELS) \
	  --flaggems-checkout=$(FLAGGEMS_DIR)

corpus-gpu: corpus-sources
	$(PY) tests/corpus/record.py --out tests/corpus --flaggems-checkout $(FLAGGEMS_DIR)
