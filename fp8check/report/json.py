"""JSON renderers: results to JSON-ready dicts. Nothing here writes; the CLI does."""

from __future__ import annotations

from ..budget import BudgetVerdict
from ..compare import CompareResult
from ..device import versions
from ..diagnose import Diagnosis
from .causes import diagnosis_json


def compare_json(result: CompareResult, *, diagnosis: Diagnosis | None = None,
                 budget: BudgetVerdict | None = None) -> dict:
    d = result.diff
    extra = {}
    if diagnosis is not None:
        extra["diagnosis"] = diagnosis_json(diagnosis, result.spec)
    if budget is not None:
        extra["budget"] = budget.to_dict()
    return {
        "spec": result.spec.to_dict(),
        "baseline": result.baseline.name,
        "candidate": result.candidate.name,
        "baseline_emulated": result.baseline.emulated,
        "candidate_emulated": result.candidate.emulated,
        "inputs": result.inputs.source,
        "device": result.device,
        "blocks": [
            {"block": b.block, "value_diff": b.value_diff, "value_total": b.value_total,
             "scale_diff": b.scale_diff, "scale_total": b.scale_total}
            for b in d.all_rows()
        ],
        "guard_diff": d.guard_diff,
        "diff_bytes": d.diff_bytes,
        "total_bytes": d.total_bytes,
        "identical": d.identical,
        "first_mismatch": d.first_mismatch.to_dict() if d.first_mismatch else None,
        **extra,
        "timings_s": result.timings,
        "versions": versions(),
    }


def seed_table_json(table) -> dict:
    def column(result: CompareResult, causes: Diagnosis) -> dict:
        payload = compare_json(result, diagnosis=causes)
        keys = ("candidate", "blocks", "diff_bytes", "identical", "first_mismatch", "diagnosis")
        return {key: payload[key] for key in keys}

    base = compare_json(table.buggy)
    return {
        "spec": base["spec"], "baseline": base["baseline"], "baseline_emulated": base["baseline_emulated"],
        "inputs": base["inputs"], "device": base["device"],
        "buggy": column(table.buggy, table.buggy_causes), "fixed": column(table.fixed, table.fixed_causes),
        "passed": table.passed,
        "versions": base["versions"],
    }
