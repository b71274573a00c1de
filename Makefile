# Set-up is part of every target: a fresh machine needs only Python 3.10+ and these commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fp8check-installed

.PHONY: compare test test-install gate bench table parity doctor clean vllm-wheel-table

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# An environment that already has torch (a CPU or a CUDA build) keeps it; otherwise torch 2.13.0
	# comes from pip's configured index.
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

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
