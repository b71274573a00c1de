"""What a top-K parity run found (parity.py): per writer and context the metrics against the truth, the
reader's obligations, and the verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..core.outcome import json_safe
from ..core.metrics import Metrics
from ..producers.obligations import Findings
from ..core.producer import Reader
from ..core.spec import CacheSpec
from ..producers.registry import Producer
from .parity_inputs import ParityConfig


Progress = Callable[[str, int, int], None]  # (what runs now, steps done, steps in all)

# ---- results ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One writer's rows (one Metrics per ctx of the config, in order)."""

    name: str
    description: str
    emulated: bool
    expect_fail: bool
    rows: tuple[Metrics, ...]
    faults: tuple[str, ...] = ()  # stray writes, modified inputs (CacheBuffer.faults): a failure either way

    def failing(self, config: ParityConfig) -> list[tuple[int, float]]:
        """(ctx, recall) of the non-vacuous rows below --min-recall."""
        return [(c, m.recall) for c, m in zip(config.ctx, self.rows)
                if not m.vacuous and m.recall < config.min_recall and not m.tie]


def fraction(x: float) -> str:
    """3 decimals, with more where a value below 1 would otherwise print as 1.000."""
    digits = 3
    while x < 1 and f"{x:.{digits}f}" == "1." + "0" * digits and digits < 9:
        digits += 1
    return f"{x:.{digits}f}"


def rel(x: float) -> str:
    return "nan" if math.isnan(x) else ("0" if x == 0 else f"{x:.1e}")


def _worst(failing: list[tuple[int, float]]) -> str:
    ctx, recall = min(failing, key=lambda item: item[1])
    return f"lowest recall {fraction(recall)} at ctx {ctx}, {len(failing)} row(s) below the bar"


@dataclass(frozen=True)
class Note:
    """One line under the parity table; `tone` (info, warn, pass, fail, expected) lets a renderer style it."""

    tone: str
    text: str


@dataclass(frozen=True)
class ParityResult:
    spec: CacheSpec
    config: ParityConfig
    source: str
    heads: int
    device: str
    baseline: Producer
    reader: Reader
    columns: tuple[Column, ...]
    reader_check: tuple[Metrics, ...] | None  # the reader on the baseline's bytes; None: it is the reference
    timings: dict[str, float] = field(default_factory=dict)
    obligations: Findings = Findings()  # masked positions not -inf, writes outside the rows, over every read
    reader_reads: str | None = None  # on a reader fault: the layout under which the exact reader agrees with it
    baseline_faults: tuple[str, ...] = ()  # the baseline's stray writes or modified inputs: no truth to trust
    kind = "parity"

    @property
    def faults(self) -> tuple[str, ...]:
        """Every writer's stray writes and modified inputs, the baseline's first."""
        return self.baseline_faults + tuple(f for col in self.columns for f in col.faults)

    @property
    def reader_disagreements(self) -> list[tuple[int, float]]:
        """(ctx, recall) where the reader, on the baseline's own bytes, misses the truth's top-K."""
        if self.reader_check is None:
            return []
        return [(c, m.recall) for c, m in zip(self.config.ctx, self.reader_check)
                if not m.vacuous and m.recall < self.config.min_recall and not m.tie]

    @property
    def reader_ties(self) -> list[tuple[int, float, int]]:
        """(ctx, recall, tokens missed) where the reader, on the baseline's bytes, misses the truth's top-K only
        by near-ties (every miss within tolerance of the K-th logit): no fault (readers/metrics.py)."""
        if self.reader_check is None:
            return []
        return [(c, m.recall, m.missed) for c, m in zip(self.config.ctx, self.reader_check)
                if not m.vacuous and m.recall < self.config.min_recall and m.tie]

    @property
    def reader_fault(self) -> bool:
        """The reader disagrees with the exact reader beyond near-ties, or breaks an obligation."""
        return bool(self.reader_disagreements) or self.obligations.broken

    @property
    def all_vacuous(self) -> bool:
        return all(self.config.vacuous(c) for c in self.config.ctx)

    @property
    def passed(self) -> bool:
        """No reader fault, no writer fault (stray writes, modified inputs; expected failures included), and
        every writer not expected to fail meets --min-recall on every non-vacuous row."""
        return not self.reader_fault and not self.faults and all(col.expect_fail or not col.failing(self.config) for col in self.columns)

    def verdict_line(self) -> str:
        c = self.config
        writers = ", ".join(col.name for col in self.columns)
        head = "PASS" if self.passed else "FAIL"
        fault = "; READER FAULT" if self.reader_fault else ""
        fault += "".join(f"; {f}" for f in self.faults)
        if not self.columns:  # the reader alone, on the baseline's bytes
            return (f"{head}: top-{c.topk} of {self.reader.name} reading {self.baseline.name}'s bytes against the exact"
                    f" reader, ctx {min(c.ctx)}-{max(c.ctx)}{fault}")
        return f"{head}: top-{c.topk} parity of {writers} read by {self.reader.name}, ctx {min(c.ctx)}-{max(c.ctx)}{fault}"

    def _column_note(self, col: Column) -> Note:
        c = self.config
        failing = col.failing(c)
        bar = f"recall@{c.topk} >= {c.min_recall:g} on every non-vacuous row"
        if not failing:
            if col.expect_fail:
                return Note("warn", f"{col.name}: expected to fail (--expect-fail) but passes: {bar}")
            return Note("pass", f"{col.name}: PASS, {bar}")
        if col.expect_fail:
            return Note("expected", f"{col.name}: FAIL, as expected (--expect-fail): {_worst(failing)}")
        return Note("fail", f"{col.name}: FAIL: {_worst(failing)}")

    def notes(self) -> list[Note]:
        c = self.config
        lines = []
        if any(c.vacuous(ctx) for ctx in c.ctx):
            lines.append(Note("info",
                f"vacuous rows: every query row sees <= K = {c.topk} tokens, so every token is selected and any"
                f" writer scores recall 1.000 there (this is why the seed's bug hid below ctx {c.topk + 1});"
                " pick a smaller --topk to test those lengths."))
        if self.all_vacuous:
            lines.append(Note("warn", f"every row is vacuous (ctx <= K = {c.topk}): recall cannot tell these writers"
                                      " apart; the verdict below says nothing about them."))
        lines += self._obligation_notes()
        if self.reader_check is not None:
            worst = max((m.max_rel for m in self.reader_check), key=lambda x: (math.isnan(x), x))
            if self.reader_disagreements:
                lines.append(Note("fail",
                    f"READER FAULT: reader {self.reader.name!r} disagrees with fp8check's reference reader on the"
                    f" baseline's own bytes ({_worst(self.reader_disagreements)}; max_rel {rel(worst)}): "
                    + (f"it reads the cache as {self.reader_reads} (fp8check's exact reader reading"
                       f" {self.reader_reads} agrees with it) where {self.spec.layout.value} was written."
                       if self.reader_reads else
                       f"it reads a different layout or format from the one written ({self.spec.layout.value} layout,"
                       f" {self.spec.fp8.value}).")
                    + " The writer columns measure the reader, not the writers."))
            elif self.reader_ties:
                ties = ", ".join(f"ctx {ctx}: recall {fraction(recall)}, {missed} missed"
                                 for ctx, recall, missed in self.reader_ties)
                lines.append(Note("warn",
                    f"reader {self.reader.name!r} misses the truth's top-{c.topk} only by near-ties on the baseline's"
                    f" bytes ({ties}): every token it selects wrongly has a true logit within atol + rtol * |L| of"
                    f" the K-th (rtol {c.rtol:g}, atol {c.atol:g}); its rounding reorders near-equal tokens, it reads"
                    " the right bytes. Not a reader fault."))
            elif not self.obligations.broken:
                lines.append(Note("pass",
                    f"reader {self.reader.name!r} agrees with the reference reader on the baseline's bytes"
                    f" (recall@{c.topk} >= {c.min_recall:g} on every non-vacuous row; max_rel up to {rel(worst)})."))
        lines += [self._column_note(col) for col in self.columns]
        lines += [Note("fail", f"FAIL: {fault} (stray writes and modified inputs fail the run, whatever the recall)")
                  for fault in self.faults]
        lines.append(Note("info",
            f"recall@K: share of the writer's K selected tokens whose true logit is >= the true K-th largest (ties"
            f" count); positional@K: positions where the two ascending-sorted top-K index lists agree (the seed's"
            f" numbers; never a verdict); max_rel = max|L-L*| / max|L*|; bad/N: tokens with |L-L*| > atol + rtol|L*|"
            f" (rtol {c.rtol:g}, atol {c.atol:g}), NaN counts as bad."))
        return lines

    def _obligation_notes(self) -> list[Note]:
        """READER FAULT lines for masked positions that are not -inf and writes outside the output rows."""
        found, lines = self.obligations, []
        if found.leaks:
            lines.append(Note("fail",
                f"READER FAULT: reader {self.reader.name!r} returns {found.leaks} logits at positions a query row may"
                f" not see (they must be -inf; row n of next_n sees positions up to ctx - next_n + n): "
                + "; ".join(x.describe() for x in found.leaked)))
        if found.outside:
            rows = self.config.next_n * len(self.config.ctx)
            lines.append(Note("fail",
                f"READER FAULT: reader {self.reader.name!r} wrote {found.outside} elements outside its output rows: "
                + "; ".join(x.describe(rows, self.config.max_ctx) for x in found.written)))
        return lines

    def top_cause(self) -> str | None:
        return next((n.text for n in self.notes() if n.tone == "fail"), None)

    def detail(self) -> str:
        return "\n".join(n.text for n in self.notes())

    def to_json(self) -> dict:
        c = self.config

        def record(ctx: int, writer: str, m: Metrics) -> dict:
            """One (ctx, writer) record; a max_rel that is not finite (a NaN or inf logit) is null."""
            out = {"ctx": ctx, "writer": writer, **m.to_dict()}
            if not math.isfinite(out["max_rel"]):
                out["max_rel"] = None
            return out

        check = None
        if self.reader_check is not None:
            check = [record(ctx, self.baseline.name, m) for ctx, m in zip(c.ctx, self.reader_check)]
        return json_safe({
            "spec": self.spec.to_dict(),
            "inputs": {"source": self.source, "heads": self.heads, "tokens": c.max_ctx},
            "config": c.to_dict(),
            "faults": list(self.faults),
            "baseline": {"name": self.baseline.name, "description": self.baseline.description,
                         "emulated": self.baseline.emulated},
            "writers": [{"name": col.name, "description": col.description, "emulated": col.emulated,
                         "expect_fail": col.expect_fail, "passed": not col.failing(c)} for col in self.columns],
            "reader": {"name": self.reader.name, "description": self.reader.description,
                       "exact": self.reader.exact, "provenance": self.reader.provenance},
            "records": [record(ctx, col.name, m) for col in self.columns for ctx, m in zip(c.ctx, col.rows)],
            "reader_check": check,
            "reader_fault": self.reader_fault,
            "reader_obligations": self.obligations.to_dict(),
            "reader_ties": [{"ctx": ctx, "recall": recall, "missed": missed}
                            for ctx, recall, missed in self.reader_ties],
            "reader_reads": self.reader_reads,
            "passed": self.passed,
            "device": self.device,
        })

    def run_json(self) -> dict:
        return {"timings_s": dict(self.timings)}

    def views(self) -> tuple:
        """Recall against context per writer (and the reader on the baseline's bytes), vacuous contexts shaded;
        then every note: the reader's verdict, each writer's."""
        from ..core.views import Curves, Series, Table

        c = self.config
        series = [Series(col.name, tuple(c.ctx), tuple(m.recall for m in col.rows),
                         "expected to fail" if col.expect_fail else "") for col in self.columns]
        if self.reader_check is not None:
            series.append(Series(f"{self.baseline.name} (reader check)", tuple(c.ctx),
                                 tuple(m.recall for m in self.reader_check)))
        curves = Curves("recall", f"recall@{c.topk} read by {self.reader.name}", "context (tokens)",
                        f"recall@{c.topk}", tuple(series), shaded=tuple(x for x in c.ctx if c.vacuous(x)),
                        shaded_label=f"vacuous: ctx <= K = {c.topk}", log_x=max(c.ctx) >= 8 * min(c.ctx))
        records = tuple((col.name, str(ctx), fraction(m.recall), "vacuous" if m.vacuous else "", rel(m.max_rel))
                        for col in self.columns for ctx, m in zip(c.ctx, col.rows))
        return (curves, Table("verdicts", ("", "note"), tuple((n.tone, n.text) for n in self.notes())),
                Table("rows", ("writer", "ctx", f"recall@{c.topk}", "", "max_rel"), records))
