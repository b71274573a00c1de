"""The Python API for test suites: `compare_writers(candidate, baseline="auto", **spec_and_inputs) -> Result`
(docs/api.md). Keywords are the CLI's options under their config names, validated by options.py, plus `k` /
`slot_mapping` tensors. CPU and GPU calls mix in one process.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable

from .core.errors import ProducerError


@dataclass(frozen=True)
class Result:
    """A decided comparison: per-block counts, every differing byte's cause, the budget verdict."""

    passed: bool
    identical: bool
    diff_bytes: int
    total_bytes: int
    value_diff: tuple[int, ...]  # differing value bytes per block
    scale_diff: tuple[int, ...]  # differing scale bytes per block
    guard_diff: int  # bytes written outside the cache
    verdict: str  # the one verdict line
    first_mismatch: Any  # diff.Mismatch or None
    diagnosis: Any  # diagnose.Diagnosis: causes, most bytes first
    budget: Any  # budget.BudgetVerdict
    check: Any  # gate.CompareCheck: the whole record (spec, inputs, both caches)

    def summary(self) -> str:
        """The verdict, the first mismatch and every cause with its hint."""
        r = self.check.result
        head = f"{r.baseline.name} vs {r.candidate.name} ({r.spec.summary()}; {r.inputs.source})"
        return "\n".join(part for part in (self.verdict, head, self.check.detail()) if part)


def as_producer(writer: Callable, role: str):
    from .producers import registry

    if not callable(writer):
        raise ProducerError(f"{role} must be a producer name or a writer function, got {writer!r}")
    name = getattr(writer, "__qualname__", None) or repr(writer)
    try:
        signature = inspect.signature(writer)
        signature.bind(None, None, None, None, None)
    except (TypeError, ValueError):
        raise ProducerError(f"{role} {name} must take (k, kv_cache, slot_mapping, quant_block_size, scale_fmt)") from None
    params = signature.parameters
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    keywords = frozenset(k for k in registry.EXTRA_KEYWORDS if k in params or var_kw)
    module = getattr(writer, "__module__", None)
    return registry.Producer(name, f"{name} from {module}", writer, keywords=keywords,
                             provenance={"function": name, "module": module})


def compare_writers(candidate: str | Callable, baseline: str | Callable = "auto", *, k=None, slot_mapping=None,
                    **spec_and_inputs) -> Result:
    """Run both writers on the same K into fresh poisoned caches, diff the bytes, diagnose and decide."""
    from .run.compare import check_compare
    from .core.inputs import Inputs
    from .run.prepare import Request, prepare

    names = {role: w for role, w in (("baseline", baseline), ("candidate", candidate)) if isinstance(w, str)}
    request = Request.of("compare", {**spec_and_inputs, **names}, where="compare_writers()")
    given = None
    if k is not None:
        import torch

        if slot_mapping is None:
            slot_mapping = torch.arange(k.shape[0], dtype=torch.int64)
        given = Inputs(k.contiguous(), slot_mapping.contiguous(), "k given by the caller")
    functions = {role: as_producer(w, role) for role, w in (("baseline", baseline), ("candidate", candidate))
                 if not isinstance(w, str)}
    run = prepare(request, given_inputs=given, producers=functions)
    # any Triton kernel on the CPU (not only fp8check's) runs under the exact conversion, proven first
    if run.device.type == "cpu" and "triton" in sys.modules:
        from .triton_cpu.known_answers import require_any_kernel

        require_any_kernel(run.spec.fp8)
    checked = check_compare(run.spec, baseline=run.sides["baseline"], candidate=run.sides["candidate"],
                            inputs=run.inputs, device=run.device, budget=request.budget(),
                            pad_slot=request.values["pad_slot"], map_blocks=tuple(request.values["map_blocks"]))
    d = checked.result.diff
    return Result(passed=checked.passed, identical=checked.result.identical, diff_bytes=d.diff_bytes,
                  total_bytes=d.total_bytes, value_diff=tuple(d.value_diff.cpu().tolist()),
                  scale_diff=tuple(d.scale_diff.cpu().tolist()), guard_diff=d.guard_diff,
                  verdict=checked.verdict_line(), first_mismatch=d.first_mismatch, diagnosis=checked.diagnosis,
                  budget=checked.budget, check=checked)


def run_gate(config, *, candidate: str | None = None, checkouts=(), device: str | None = None, patterns=(),
             strict: bool = False):
    """`fp8check gate CONFIG [--candidate NAME] [--checkout PROJECT=PATH] [--device D] [-k EXPR] [--strict]` from
    Python: every selected case run, as the Outcomes the CLI renders."""
    from .run.gate import run_gate as run
    from .run.gate_config import load, select

    cases = select(load(config, device=device, checkouts=tuple(checkouts), candidate=candidate).cases, tuple(patterns))
    return run(str(config), cases, strict=strict)
