"""JSON: a run's outcomes as one document (docs/compare.md, docs/gate.md); what depends on the run rather than
the bytes (timings, versions) under `run`. Strict JSON: non-finite floats are the strings "nan", "inf", "-inf".
Every string is printable (errors.printable, line breaks kept): a terminal escape stays visible text."""

from __future__ import annotations

import json

from ..core.device import versions
from ..core.errors import printable
from ..core.outcome import Outcomes, Status, json_safe

SCHEMA_VERSION = 2


def document(run: Outcomes) -> dict:
    """A single command's result, or a gate's cases with their status, verdict line and top cause."""
    if not run.batch:
        (o,) = run.outcomes
        head = {"schema_version": SCHEMA_VERSION, "kind": o.kind}
        if o.result is None:
            return {**head, "passed": False, "exit_code": int(o.exit_code), "error": o.error}
        return {**head, **o.result.to_json(), "passed": o.result.passed, "verdict": o.verdict_line(),
                "run": {**o.result.run_json(), "versions": versions()}}
    return {
        "schema_version": SCHEMA_VERSION, "kind": "gate", "config": run.title.removeprefix("gate "),
        "passed": run.exit_code == 0, "exit_code": int(run.exit_code),
        "counts": {"selected": run.selected, "ran": len(run.outcomes), **{s.value: run.count(s) for s in Status}},
        "cases": [{"id": o.case_id, "kind": o.kind, "status": o.status.value, "exit_code": int(o.exit_code),
                   "verdict": o.verdict_line(), "cause": o.top_cause(), "error": o.error,
                   **({} if o.reason is None else {"expect_reason": o.reason}),
                   "result": None if o.result is None else o.result.to_json()} for o in run.outcomes],
        "run": {"seconds": run.seconds, "case_seconds": {o.case_id: o.seconds for o in run.outcomes},
                "versions": versions()},
    }


def _printable(value):
    if isinstance(value, str):
        return printable(value, newlines=True)
    if isinstance(value, dict):
        return {_printable(key): _printable(v) for key, v in value.items()}
    return [_printable(v) for v in value] if isinstance(value, list) else value


def render(run: Outcomes) -> str:
    return json.dumps(_printable(json_safe(document(run))), indent=2, allow_nan=False) + "\n"
