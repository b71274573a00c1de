"""Gate a kernel repository's FP8 K-cache writer with fp8check: drop this file into its tests.

fp8check's pytest plugin (installed with fp8check) gives the `fp8check` fixture and, without a GPU,
runs Triton kernels under the interpreter with an exact FP8 conversion, so a plain `pytest` on a CPU
machine gives exact answers.
"""

from pathlib import Path

import pytest

from fp8check.pytest_plugin import fp8check_cases
from my_kernels import indexer_k_quant_and_cache  # your writer


def test_default_spec_is_byte_exact(fp8check):
    fp8check.assert_same_cache_bytes(indexer_k_quant_and_cache, baseline="auto", block=64, head_dim=128)


@pytest.mark.parametrize("case", fp8check_cases(Path(__file__).with_name("my_gate.toml")), ids=str)
def test_gate(fp8check, case):
    fp8check.assert_same_cache_bytes(indexer_k_quant_and_cache, **case)
