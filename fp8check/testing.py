"""Assertions for test suites, in the style of torch.testing.assert_close."""

from __future__ import annotations

from typing import Callable

from .api import Result, compare_writers


def assert_same_cache_bytes(candidate: str | Callable, baseline: str | Callable = "auto", **spec_and_inputs) -> Result:
    """Raise AssertionError unless the candidate writes the baseline's cache bytes (or stays within the budget
    given). The message holds the verdict, the first mismatch and the top cause with its hint."""
    __tracebackhide__ = True  # pytest shows the caller's line, not fp8check's
    result = compare_writers(candidate, baseline, **spec_and_inputs)
    if not result.passed:
        raise AssertionError(result.summary())
    return result
