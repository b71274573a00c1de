"""The Python API for test suites: `compare_writers(candidate, baseline="auto", **spec_and_inputs) -> Result`.

Writers are callables with the de-facto signature `(k, kv_cache, slot_mapping, quant_block_size,
scale_fmt)` (given `fp8_dtype=` / `layout=` when they accept them) or producer names (`triton`,
`reference`, `file:PATH:FUNC`, ...; a baseline may be `golden:FILE`, whose spec and inputs are then
used). Keywords are the CLI's options under their config names (`block`,
`head_dim`, `fp8`, `scale_fmt`, `inputs`, `slots`, `seed`, budgets ...), validated by the same table
(options.py), plus `k` / `slot_mapping` tensors to use instead of generated inputs.

On a machine without CUDA, Triton kernels run under Triton's CPU interpreter, made exact by
fp8check's FP8 conversion (SPEC.md section 6): `prepare_cpu()` sets that up, before Triton is imported.
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

from .errors import ProducerError


def prepare_cpu() -> None:
    """Without CUDA, Triton kernels must run in interpreter mode, which is read when Triton is first imported.

    Call it before the writer's module imports Triton (the pytest plugin does, at start-up). Where
    Triton was imported already, nothing changes; a CPU run is then refused or checked by `require`.
    """
    import torch

    if not torch.cuda.is_available():
        from .writers.interpreter import prepare_cpu as interpreter_mode_on

        interpreter_mode_on()


def _require_exact(spec, device) -> None:
    """Any Triton kernel on the CPU runs under the exact conversion, proven first (not only fp8check's own)."""
    if device.type != "cpu" or "triton" not in sys.modules:
        return
    from .writers.interpreter import require_any_kernel

    require_any_kernel(spec.fp8)


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
        from .report.lines import causes_text

        detail = causes_text(self.check.result.diff, self.diagnosis)
        head = f"{self.check.result.baseline.name} vs {self.check.result.candidate.name}" \
               f" ({self.check.result.spec.summary()}; {self.check.result.inputs.source})"
        return "\n".join(part for part in (self.verdict, head, detail) if part)


def as_producer(writer: str | Callable, role: str, *, device=None, fp8=None, repo=None):
    """A producer from a registry name / `file:PATH:FUNC` / `vllm-file:PATH`, or from a callable with the
    writer signature. Names resolve after `registry.prepare(device)` (interpreter mode first on the CPU)."""
    from .writers import registry

    if isinstance(writer, str):
        if device is not None:
            registry.prepare(device)
        return registry.resolve(writer, fp8=fp8, repo=repo)
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


def _given_inputs(values: dict, k, slot_mapping):
    """(spec, inputs, device) for K (and slots) given by the caller; num_blocks defaults to what the slots need."""
    import torch

    from . import options
    from .device import resolve_device
    from .inputs import Inputs, blocks_needed, validate
    from .prepare import spec_from

    if slot_mapping is None:
        slot_mapping = torch.arange(k.shape[0], dtype=torch.int64)
    data = Inputs(k.contiguous(), slot_mapping.contiguous(), "k given by the caller")
    validate("k", data.k, data.slot_mapping, None)
    opts = options.to_dests({key: values[key] for key in options.SPEC})
    spec = spec_from(opts, values["num_blocks"] or blocks_needed(data, values["block"]))
    validate("k", data.k, data.slot_mapping, spec)
    return spec, data, resolve_device(values["device"])


def compare_writers(candidate: str | Callable, baseline: str | Callable = "auto", *, k=None, slot_mapping=None,
                    **spec_and_inputs) -> Result:
    """Run both writers on the same K into fresh poisoned caches, diff the bytes, diagnose and decide."""
    from . import options
    from .budget import Budget
    from .gate import check_compare, golden_baseline
    from .gate_config import GOLDEN, GOLDEN_SPEC_KEYS
    from .prepare import build
    from .report.lines import compare_verdict

    prepare_cpu()
    keys = (*options.SPEC, *options.BUDGET, *options.CONVENTIONS)
    values = {**options.defaults(keys), **options.validate(spec_and_inputs, keys, "compare_writers()")}
    if isinstance(baseline, str) and baseline.startswith(GOLDEN):  # the recording's spec and inputs
        stated = tuple(key for key in GOLDEN_SPEC_KEYS if key in spec_and_inputs)
        spec, data, device, base = golden_baseline({**values, "baseline": baseline, "golden_check": stated})
    else:
        if k is not None:
            spec, data, device = _given_inputs(values, k, slot_mapping)
        else:
            spec, data, device = build(options.to_dests({key: values[key] for key in options.SPEC}))
        base = as_producer(baseline, "baseline", device=device, fp8=spec.fp8, repo=values["repo"])
    _require_exact(spec, device)
    checked = check_compare(
        spec, baseline=base, candidate=as_producer(candidate, "candidate", device=device, fp8=spec.fp8,
                                                   repo=values["repo"]),
        inputs=data, device=device, budget=Budget(**{key: values[key] for key in options.BUDGET}),
        pad_slot=values["pad_slot"],
    )
    d = checked.result.diff
    return Result(
        passed=checked.passed, identical=d.identical, diff_bytes=d.diff_bytes, total_bytes=d.total_bytes,
        value_diff=tuple(d.value_diff.cpu().tolist()), scale_diff=tuple(d.scale_diff.cpu().tolist()),
        guard_diff=d.guard_diff, verdict=compare_verdict(checked), first_mismatch=d.first_mismatch,
        diagnosis=checked.diagnosis, budget=checked.budget, check=checked,
    )
