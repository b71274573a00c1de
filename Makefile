# Set-up is part of every target: a fresh machine needs only Python 3.10+ and these commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fp8check-installed

.PHONY: compare test bench table doctor clean

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
	$(VENV)/bin/fp8check table --config configs/seed-table.toml

doctor: $(STAMP)
	$(VENV)/bin/fp8check doctor

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/compare_stages.py
	$(PY) bench/diagnose.py
	$(PY) bench/isolation.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
