"""The set-up asks pip for the torch build the machine needs (Makefile `TORCH_SPEC`, printed by `make -n`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def torch_request(**variables: str) -> str:
    """The pip arguments `make torch-plan` would use, with a PATH holding only make and the shell's tools."""
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    argv = ["make", "-s", "-n", "torch-plan", "PYTHON=python3", *(f"{k}={v}" for k, v in variables.items())]
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    return out.split("--report - ", 1)[1].split("\\", 1)[0].split("|", 1)[0].strip()


@pytest.mark.cpu
def test_a_machine_without_a_gpu_gets_the_cpu_build_from_the_cpu_only_index():
    if shutil.which("nvidia-smi", path="/usr/bin:/bin") or os.path.exists("/dev/kfd"):
        pytest.skip("this machine has a GPU driver")
    assert torch_request() == "torch==2.13.0+cpu --extra-index-url https://download.pytorch.org/whl/cpu"


@pytest.mark.parametrize("index, expected", [
    ("cu126", "torch==2.13.0+cu126 --extra-index-url https://download.pytorch.org/whl/cu126"),
    ("rocm6.4", "torch==2.13.0+rocm6.4 --extra-index-url https://download.pytorch.org/whl/rocm6.4"),
    ("pypi", "torch==2.13.0"),
])
def test_torch_index_names_the_build(index, expected):
    assert torch_request(TORCH_INDEX=index) == expected
