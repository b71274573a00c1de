"""Fixtures shared by the adapter and doctor tests."""

from __future__ import annotations

import sys

import pytest
import torch

# Tests run producers as the CLI does on this machine: without a GPU, Triton's interpreter mode is on
# before any test module imports Triton (writers/interpreter.prepare_cpu), so user kernels with tl.max
# run in-process. The path with no environment variable at all is proven in a fresh subprocess
# (tests/test_user_kernels.py).
if not torch.cuda.is_available():
    from fp8check.writers.interpreter import prepare_cpu

    prepare_cpu()


@pytest.fixture
def no_real_libraries(monkeypatch):
    """Whatever is installed here, each test sees only the aiter / vLLM modules it injects."""
    for name in [n for n in sys.modules if n.split(".")[0] in ("aiter", "vllm")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("aiter", "vllm"):
        monkeypatch.setitem(sys.modules, name, None)  # None: "not installed" unless a test injects one
    yield
