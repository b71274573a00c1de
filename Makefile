# Set-up is part of every target: a fresh machine needs only Python 3.10+ and these commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fp8check-installed

.PHONY: compare test test-install gate bench table parity doctor clean vllm-wheel-table ecosystem

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# The CPU build of torch 2.13.0 lies on the development machines' disk; a plain `torch` would
	# pull a multi-GB CUDA build. An environment that already has torch keeps it.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

compare: $(STAMP)
	$(VENV)/bin/fp8check compare --block 64 --head-dim 128

table: $(STAMP)
	$(VENV)/bin/fp8check table --config seed-table

parity: $(STAMP)
	$(VENV)/bin/fp8check parity --config seed-parity

doctor: $(STAMP)
	$(VENV)/bin/fp8check doctor

test: $(STAMP)
	$(PY) -m pytest

# A non-editable install into a fresh venv, fp8check run from another folder (.ci/test-install).
test-install: $(STAMP)
	.ci/test-install $(PY)

gate: $(STAMP)
	$(VENV)/bin/fp8check gate configs/ci.toml

bench: $(STAMP)
	$(PY) bench/stages.py --merge bench/results/h200-2026-11-30.json
	$(PY) bench/diagnose.py
	$(PY) bench/parity.py
	$(PY) bench/interpreter.py
	$(PY) bench/gate.py
	$(PY) bench/isolation.py
	$(PY) bench/reader_isolation.py

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

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info

# Not part of `make test`: the ecosystem matrix on this machine. fp8check downloads each project's released
# wheel without dependencies (pinned hashes, fp8check/projects/*.toml) into its cache folder, once; FlagGems'
# writer and reader are only in its repository, so a clone at FLAGGEMS_REV goes to .cache/ (once).
FLAGGEMS_REV ?= ed2508bcb
FLAGGEMS_DIR := .cache/flaggems
ecosystem: $(STAMP)
	test -d $(FLAGGEMS_DIR) || git clone -q https://github.com/flagos-ai/FlagGems $(FLAGGEMS_DIR)
	git -C $(FLAGGEMS_DIR) checkout -q $(FLAGGEMS_REV)
	$(VENV)/bin/fp8check ecosystem --checkout flaggems=$(FLAGGEMS_DIR)
