"""Fixtures shared by the adapter and doctor tests."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture
def no_real_libraries(monkeypatch):
    """Whatever is installed here, each test sees only the aiter / vLLM modules it injects."""
    for name in [n for n in sys.modules if n.split(".")[0] in ("aiter", "vllm")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("aiter", "vllm"):
        monkeypatch.setitem(sys.modules, name, None)  # None: "not installed" unless a test injects one
    yield
