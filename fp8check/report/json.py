"""JSON renderers: results to JSON-ready dicts. Nothing here writes; the CLI does.

Schema (`schema_version` 2): results first; everything that depends on the run rather than on the
bytes (timings, versions) under one key, `run`. Per-block counts are arrays indexed by block
(`value_diff[b]`, `scale_diff[b]`; `value_total` / `scale_total` are the bytes of one block). No NaN or
Infinity anywhere: non-finite floats are the strings "nan", "inf", "-inf" (strict parsers reject bare NaN).
"""

from __future__ import annotations

import math

from ..budget import BudgetVerdict
from ..compare import CompareResult
from ..device import versions
from ..diagnose import Diagnosis
from .causes import diagnosis_json

SCHEMA_VERSION = 2


def finite(value):
    """The value with every non-finite float replaced by its string: valid strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def compare_results(result: CompareResult, *, diagnosis: Diagnosis | None = None,
                    budget: BudgetVerdict | None = None) -> dict:
    """What a compare found, without run-dependent data."""
    d = result.diff
    extra = {}
    if diagnosis is not None:
        extra["diagnosis"] = diagnosis_json(diagnosis, result.spec)
    if budget is not None:
        extra["budget"] = budget.to_dict()
    return finite({
        "spec": result.spec.to_dict(),
        "baseline": result.baseline.name,
        "candidate": result.candidate.name,
        "baseline_emulated": result.baseline.emulated,
        "candidate_emulated": result.candidate.emulated,
        "baseline_provenance": result.baseline.provenance,
        "candidate_provenance": result.candidate.provenance,
        "inputs": result.inputs.source,
        "device": result.device,
        "value_diff": d.value_diff.cpu().tolist(),
        "scale_diff": d.scale_diff.cpu().tolist(),
        "value_total": result.spec.value_bytes,
        "scale_total": result.spec.scale_bytes,
        "guard_diff": d.guard_diff,
        "diff_bytes": d.diff_bytes,
        "total_bytes": d.total_bytes,
        "identical": result.identical,
        "faults": list(result.faults),
        "modified_inputs": {"baseline": list(result.baseline.buffer.modified_inputs),
                            "candidate": list(result.candidate.buffer.modified_inputs)},
        "first_mismatch": d.first_mismatch.to_dict() if d.first_mismatch else None,
        "interpreter_note": result.interpreter_caveat,
        **extra,
    })


def run_info(timings: dict[str, float] | None = None) -> dict:
    """The run-dependent part: timings and versions."""
    return {"timings_s": dict(timings or {}), "versions": versions()}


def compare_json(result: CompareResult, *, diagnosis: Diagnosis | None = None,
                 budget: BudgetVerdict | None = None, verdict: str | None = None, passed: bool | None = None) -> dict:
    payload = {"schema_version": SCHEMA_VERSION, "kind": "compare",
               **compare_results(result, diagnosis=diagnosis, budget=budget)}
    if passed is not None:
        payload["passed"] = passed
    if verdict is not None:
        payload["verdict"] = verdict
    return {**payload, "run": run_info(result.timings)}


def seed_table_results(table) -> dict:
    def column(result: CompareResult, causes: Diagnosis) -> dict:
        payload = compare_results(result, diagnosis=causes)
        keys = ("candidate", "candidate_provenance", "value_diff", "scale_diff", "diff_bytes", "identical",
                "first_mismatch", "diagnosis")
        return {key: payload[key] for key in keys}

    base = compare_results(table.buggy)
    return {
        "spec": base["spec"], "baseline": base["baseline"], "baseline_emulated": base["baseline_emulated"],
        "baseline_provenance": base["baseline_provenance"],
        "interpreter_note": table.fixed.interpreter_caveat or table.buggy.interpreter_caveat,
        "inputs": base["inputs"], "device": base["device"], "value_total": base["value_total"],
        "scale_total": base["scale_total"],
        "buggy": column(table.buggy, table.buggy_causes), "fixed": column(table.fixed, table.fixed_causes),
        "passed": table.passed,
    }


def seed_table_json(table) -> dict:
    timings = {f"buggy_{k}": v for k, v in table.buggy.timings.items()}
    timings.update({f"fixed_{k}": v for k, v in table.fixed.timings.items()})
    return {"schema_version": SCHEMA_VERSION, "kind": "table", **seed_table_results(table), "run": run_info(timings)}


def _case_result(outcome) -> dict | None:
    from ..gate import CompareCheck

    result = outcome.result
    if result is None:
        return None
    if isinstance(result, CompareCheck):
        payload = compare_results(result.result, diagnosis=result.diagnosis, budget=result.budget)
        return {**payload, "expect": result.expect.value}
    if outcome.kind == "table":
        return seed_table_results(result)
    from .parity import to_json

    payload = to_json(result)
    return finite({k: v for k, v in payload.items() if k not in ("timings_s", "versions")})  # run data: `run`


def gate_json(result) -> dict:
    """A gate: every case's id, status, exit code, verdict line, top cause and result; timings under `run`."""
    from ..gate import Status
    from . import lines

    cases = [{
        "id": o.case_id, "kind": o.kind, "status": o.status.value, "exit_code": int(o.exit_code),
        "verdict": lines.verdict(o), "cause": lines.cause(o), "error": o.error, "result": _case_result(o),
    } for o in result.outcomes]
    counts = {s.value: result.count(s) for s in Status}
    return {
        "schema_version": SCHEMA_VERSION, "kind": "gate", "config": result.config,
        "passed": result.exit_code == 0, "exit_code": int(result.exit_code),
        "counts": {"selected": result.selected, "ran": len(result.outcomes), **counts},
        "cases": cases,
        "run": {"seconds": result.seconds, "case_seconds": {o.case_id: o.seconds for o in result.outcomes},
                "versions": versions()},
    }
