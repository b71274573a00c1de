# Set-up is part of every target: a fresh machine needs only Python 3.10+ and these commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fp8check-installed

.PHONY: compare test test-install test-triton-matrix torch-plan gate gate-gpu bench table parity doctor clean vllm-wheel-table ecosystem aiter-src-table mutation

# Which torch build: the machine decides, TORCH_INDEX=cpu|cu126|cu128|rocm6.4|... overrides. No NVIDIA or
# AMD GPU here: PyTorch's CPU-only index and a `+cpu` pin, so no CUDA package is ever downloaded (a plain
# `torch` from PyPI is the CUDA build plus ~18 nvidia packages). pypi: PyPI's own torch, as pip resolves it.
# An environment that already has torch keeps it; local wheels (pip's find-links) still win.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?= $(shell if nvidia-smi -L >/dev/null 2>&1; then echo pypi; \
	elif [ -e /dev/kfd ] || rocminfo >/dev/null 2>&1; then echo rocm6.4; else echo cpu; fi)
TORCH_PIN := torch==$(TORCH_VERSION)$(if $(filter pypi,$(TORCH_INDEX)),,+$(TORCH_INDEX))
TORCH_SPEC := $(TORCH_PIN)$(if $(filter pypi,$(TORCH_INDEX)),, --extra-index-url https://download.pytorch.org/whl/$(TORCH_INDEX))

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# the pinned build from where pip already looks (a local wheel store), else from PyTorch's index
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_PIN) 2>/dev/null \
	  || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e '.[test]'
	# aiter-src (aiter's C++ op built for the CPU) needs clang >= 20; its tests skip without one. Where
	# none is found and apt-get can install (root on Debian: clang-22 from bookworm-security), it does.
	$(PY) -c "from fp8check.writers.aiter_cpu.compiler import find; raise SystemExit(find() is None)" \
	  || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -q >/dev/null \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang-22 >/dev/null; } \
	  || echo "no clang >= 20: the aiter-src tests will be skipped"
	touch $(STAMP)

# What the set-up would install for torch here, installing nothing (pip's dry-run report; no nvidia-* on a CPU machine).
torch-plan:
	$(PYTHON) -m pip install --dry-run --ignore-installed --quiet --report - $(TORCH_SPEC) \
	  | $(PYTHON) -c "import json, sys; print('\n'.join(i['metadata']['name'] + ' ' + i['metadata']['version'] for i in json.load(sys.stdin)['install']))"

# The suite against the oldest and the newest supported Triton (README: "Supported versions"), each in a
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
	$(VENV)/bin/fp8check compare --block 64 --head-dim 128

table: $(STAMP)
	$(VENV)/bin/fp8check table --config seed-table

parity: $(STAMP)
	$(VENV)/bin/fp8check parity --config seed-parity

doctor: $(STAMP)
	$(VENV)/bin/fp8check doctor

test: $(STAMP)
	$(PY) -m pytest -n auto

# A non-editable install into a fresh venv, fp8check run from another folder (.ci/test-install).
test-install: $(STAMP)
	.ci/test-install $(PY)

gate: $(STAMP)
	$(VENV)/bin/fp8check gate configs/ci.toml

gate-gpu: $(STAMP)
	$(VENV)/bin/fp8check gate configs/gpu.toml --device cuda

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
	$(VENV)/bin/fp8check table --buggy vllm-file:$(VLLM_DIR)/pre-fix.py --fixed vllm-file:$(VLLM_DIR)/$(VLLM_OPS)

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

clean:
	rm -rf $(VENV) .venv-triton-* .pytest_cache .hypothesis *.egg-info

# Not part of `make test`: the ecosystem matrix on this machine. fp8check downloads each project's released
# wheel without dependencies (pinned hashes, fp8check/writers/projects/*.toml) into its cache folder, once; FlagGems'
# writer and reader are only in its repository, so a clone at FLAGGEMS_REV goes to .cache/ (once).
FLAGGEMS_REV ?= ed2508bcb
FLAGGEMS_DIR := .cache/flaggems
ecosystem: $(STAMP)
	test -d $(FLAGGEMS_DIR) || git clone -q https://github.com/flagos-ai/FlagGems $(FLAGGEMS_DIR)
	git -C $(FLAGGEMS_DIR) checkout -q $(FLAGGEMS_REV)
	$(VENV)/bin/fp8check ecosystem --checkout flaggems=$(FLAGGEMS_DIR)
