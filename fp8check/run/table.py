"""The seed's byte table: the buggy and the fixed Triton wrapper, each a CompareResult against one baseline
run (written once, diffed twice); rows are blocks."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .compare import CompareResult, compare, run_side
from ..diagnose import Diagnosis, diagnose
from ..diagnose.words import causes_text, top_cause
from ..core.inputs import Inputs
from ..producers.registry import Producer
from ..core.spec import CacheSpec

# the compare JSON's keys the table gives once, then those it gives per column
SHARED_KEYS = ("spec", "baseline", "baseline_emulated", "baseline_provenance", "interpreter_note", "inputs", "device",
               "value_total", "scale_total")
COLUMN_KEYS = ("candidate", "candidate_provenance", "value_diff", "scale_diff", "diff_bytes", "identical", "faults",
               "modified_inputs", "first_mismatch", "diagnosis")


@dataclass(frozen=True)
class SeedTable:
    buggy: CompareResult
    fixed: CompareResult
    buggy_causes: Diagnosis
    fixed_causes: Diagnosis

    kind = "table"

    @property
    def passed(self) -> bool:
        """The fix is proven: the fixed column is all zero, the buggy column differs, and no writer (the
        baseline included) wrote outside its cache or modified its inputs."""
        return self.fixed.diff.identical and not self.buggy.diff.identical and not self.faults

    @property
    def faults(self) -> tuple[str, ...]:
        """Stray writes and modified inputs of the baseline and both columns (CompareResult.faults)."""
        return tuple(dict.fromkeys(self.buggy.faults + self.fixed.faults))

    def _deciding(self) -> tuple[CompareResult, Diagnosis]:
        """The column that decides a failed table: the fixed one when it differs."""
        return (self.fixed, self.fixed_causes) if not self.fixed.diff.identical else (self.buggy, self.buggy_causes)

    def verdict_line(self) -> str:
        modified = f"FAIL: {'; '.join(self.faults)}; " if self.faults else ""
        if self.fixed.diff.identical and not self.buggy.diff.identical:
            return f"{modified or 'PASS: '}the fixed wrapper matches byte for byte; the buggy wrapper differs"
        if not self.fixed.diff.identical:
            return f"{modified or 'FAIL: '}the fixed wrapper differs in {self.fixed.diff.diff_bytes} bytes"
        return f"{modified or 'FAIL: '}the buggy wrapper matches too: this table cannot tell the two apart"

    def top_cause(self) -> str | None:
        return self.faults[0] if self.faults else top_cause(self._deciding()[1], self.buggy.spec)

    def detail(self) -> str:
        column, causes = self._deciding()
        first = [f"first mismatch: {column.diff.first_mismatch.describe()}"] if column.diff.first_mismatch else []
        return "\n".join([*self.faults, *first, *causes_text(causes, column.spec)])

    def to_json(self) -> dict:
        buggy, fixed = self.buggy.to_json(self.buggy_causes), self.fixed.to_json(self.fixed_causes)
        shared = {key: buggy[key] for key in SHARED_KEYS}
        shared["interpreter_note"] = fixed["interpreter_note"] or buggy["interpreter_note"]
        return {**shared, "buggy": {key: buggy[key] for key in COLUMN_KEYS},
                "fixed": {key: fixed[key] for key in COLUMN_KEYS}, "passed": self.passed}

    def views(self) -> tuple:
        """The maps and tables of each column whose bytes differ, each titled with its column."""
        from ..diagnose.maps import diagnosis_views
        from ..core.views import CellMap

        def titled(label: str, view):
            named = {"name": f"{label.lower()}-{view.name}"} if isinstance(view, CellMap) else {}
            return replace(view, title=f"{label} column: {view.title}", **named)

        return tuple(titled(label, view) for label, column, causes in (("BUGGY", self.buggy, self.buggy_causes),
                                                                       ("FIXED", self.fixed, self.fixed_causes))
                     if not column.diff.identical for view in diagnosis_views(column.spec, causes))

    def run_json(self) -> dict:
        columns = (("buggy", self.buggy), ("fixed", self.fixed))
        return {"timings_s": {f"{name}_{k}": v for name, col in columns for k, v in col.timings.items()}}


def seed_table(
    spec: CacheSpec, *, baseline: Producer, buggy: Producer, fixed: Producer, inputs: Inputs, device: torch.device
) -> SeedTable:
    inputs = inputs.to(device)
    base = run_side(baseline, spec, inputs, device)
    columns = [compare(spec, baseline=base, candidate=c, inputs=inputs, device=device) for c in (buggy, fixed)]
    causes = [diagnose(spec, r.baseline.buffer, r.candidate.buffer, r.inputs, diff=r.diff) for r in columns]
    return SeedTable(buggy=columns[0], fixed=columns[1], buggy_causes=causes[0], fixed_causes=causes[1])
