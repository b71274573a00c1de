"""What fp8check provides to a project's file in place of the project (`standin = NAME` in a project table):
the real Triton and torch modules, small helpers, and stand-ins whose answers follow the run (RunFacts).
"""

from __future__ import annotations

import importlib
import logging
import math
from dataclasses import dataclass
from typing import Callable

import torch

from ...core.spec import FP8Format, Layout

CPU_CU_COUNT = 256  # vLLM's own fallback in _decode_cu_count when no GPU answers (gfx950's count)


@dataclass
class RunFacts:
    """The facts of the run a project's names are bound to; `rebind` changes them before each run."""

    fp8: FP8Format
    layout: Layout | None
    device: torch.device


# Closed vocabulary of `run = NAME`: a fact of the run.
RUN_FACTS: dict[str, tuple[Callable[[RunFacts], object], str]] = {
    "fp8_dtype": (lambda f: f.fp8.torch_dtype(), "the run's FP8 dtype"),
    "is_fnuz": (lambda f: f.fp8 is FP8Format.E4M3FNUZ, "true iff the run's FP8 format is e4m3fnuz"),
    "is_shuffle": (lambda f: f.layout is Layout.SHUFFLE, "true iff the run's layout is shuffle"),
    "fp8_max": (lambda f: f.fp8.max, "the largest finite value of the run's FP8 format"),
}


@dataclass(eq=False)
class Platform:
    """vLLM's `current_platform`, as far as a writer or reader needs it, for the run's FP8 format."""

    ATTRIBUTES = ("fp8_dtype", "is_rocm", "is_cuda", "is_fp8_fnuz")
    facts: RunFacts

    def fp8_dtype(self) -> torch.dtype:
        return self.facts.fp8.torch_dtype()

    def is_rocm(self) -> bool:
        return self.facts.fp8 is FP8Format.E4M3FNUZ  # vLLM picks fnuz iff the arch is gfx94x (docs/NUMERICS.md)

    def is_cuda(self) -> bool:
        return not self.is_rocm()

    def is_fp8_fnuz(self) -> bool:
        return self.facts.fp8 is FP8Format.E4M3FNUZ

    def describe(self) -> str:
        return f"fp8check stand-in: fp8_dtype() = {self.fp8_dtype()}, is_rocm() = {self.is_rocm()}"


@dataclass(eq=False)
class Workspace:
    """vLLM's workspace manager: every request gets new tensors on the run's device (NaN-filled floats,
    so a reader that reads what it never wrote shows up)."""

    device: torch.device

    def get_simultaneous(self, *requests):
        return tuple(torch.full(shape, math.nan if dtype.is_floating_point else -1, dtype=dtype,
                                device=self.device) for shape, dtype in requests)


def cdiv(a, b):
    return -(a // -b)


def _cu_count(facts: RunFacts) -> Callable[[], int]:
    return lambda: torch.cuda.get_device_properties(facts.device).multi_processor_count \
        if facts.device.type == "cuda" else CPU_CU_COUNT


def _triton_configs(facts: RunFacts, params: dict):
    """A project's autotuning table (e.g. FlagGems' `runtime.get_tuned_config(op)`) reduced to the configs
    the table lists: on the CPU interpreter each autotune candidate costs a whole run."""
    import triton
    configs = [triton.Config(dict(c)) for c in params.get("configs", [])]
    return lambda *args, **kwargs: list(configs)


def _module(name: str) -> Callable[[RunFacts, dict], object]:
    return lambda facts, params: importlib.import_module(name)


def _triton_version() -> str:
    import triton
    return f"Triton {triton.__version__}"


STANDINS: dict[str, tuple[Callable[[RunFacts, dict], object], Callable[[], str]]] = {
    "triton": (_module("triton"), lambda: f"triton ({_triton_version()})"),
    "triton.language": (_module("triton.language"), lambda: f"triton.language ({_triton_version()})"),
    "torch": (lambda f, p: torch, lambda: f"torch {torch.__version__}"),
    "torch.nn.functional": (_module("torch.nn.functional"), lambda: "torch.nn.functional"),
    "cdiv": (lambda f, p: cdiv, lambda: "fp8check's cdiv(a, b) = -(a // -b)"),
    "vllm_platform": (lambda f, p: Platform(f), lambda: "fp8check stand-in for vLLM's current_platform (the run's FP8 format)"),
    "vllm_workspace_manager": (lambda f, p: (lambda w=Workspace(f.device): w),
                               lambda: "fp8check stand-in: get_simultaneous returns new tensors on the run's device"),
    "vllm_decode_cu_count": (lambda f, p: _cu_count(f),
                             lambda: f"fp8check stand-in: {CPU_CU_COUNT} on the CPU, the GPU's count on CUDA"),
    "logger": (lambda f, p: logging.getLogger("fp8check.project_file"), lambda: "logging.getLogger('fp8check.project_file')"),
    "get_logger": (lambda f, p: logging.getLogger, lambda: "logging.getLogger"),
    "triton_configs": (_triton_configs, lambda: "fp8check stand-in: the autotune configs the project table lists"),
}

# Stand-ins whose attribute uses are checked when a file is planned (an attribute not listed is refused).
CHECKED_ATTRIBUTES = {"vllm_platform": Platform.ATTRIBUTES}
