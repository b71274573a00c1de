"""Top-K parity, end to end: writer -> cache bytes -> reader -> indexer logits -> top-K (docs/parity.md).

Each writer runs once on max(ctx) tokens of one paged sequence; each ctx row's sequence is its first ctx
tokens (the same blocks and block table). The reader runs once per writer on a batch of len(ctx) sequences.
The truth is fp8check's reference reader on the baseline's bytes (float64); the metrics: core/metrics.py.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..core.errors import InputError, UsageError
from ..core.inputs import Inputs
from ..core.metrics import Metrics, compare_logits, quantize_q, visible_tokens
from ..core.outcome import json_safe
from ..core.producer import Reader
from ..core.spec import CacheSpec, FP8Format, Layout, ScaleFormat
from ..producers import reader_reference as reference_reader, registry as producers
from ..producers.obligations import Findings, leaks
from ..producers.readers import run_reader_guarded
from ..producers.registry import Producer
from .parity_inputs import ParityConfig, QueryInputs, cache_spec, generate

Progress = Callable[[str, int, int], None]  # (what runs now, steps done, steps in all)


@dataclass(frozen=True)
class Column:
    """One writer's rows (one Metrics per ctx of the config, in order)."""

    name: str
    description: str
    emulated: bool
    expect_fail: bool
    rows: tuple[Metrics, ...]
    faults: tuple[str, ...] = ()  # stray writes, modified inputs (CacheBuffer.faults): a failure either way
    provenance: dict = field(default_factory=dict)  # what ran, for a writer from a file (compare's provenance)

    def failing(self, config: ParityConfig) -> list[tuple[int, float]]:
        """(ctx, recall) of the non-vacuous rows below --min-recall."""
        return [(c, m.recall) for c, m in _below(config, self.rows, tie=False)]


def _below(config: ParityConfig, rows, *, tie: bool) -> list[tuple[int, Metrics]]:
    """(ctx, metrics) of the non-vacuous rows below --min-recall, lost to near-ties only (`tie`) or not."""
    return [(c, m) for c, m in zip(config.ctx, rows)
            if not m.vacuous and m.recall < config.min_recall and bool(m.tie) is tie]


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
        return [(c, m.recall) for c, m in _below(self.config, self.reader_check or (), tie=False)]

    @property
    def reader_ties(self) -> list[tuple[int, float, int]]:
        """(ctx, recall, tokens missed) where the reader, on the baseline's bytes, misses the truth's top-K only
        by near-ties (every miss within tolerance of the K-th logit): no fault (core/metrics.py)."""
        return [(c, m.recall, m.missed) for c, m in _below(self.config, self.reader_check or (), tie=True)]

    @property
    def reader_fault(self) -> bool:
        """The reader disagrees with the exact reader beyond near-ties, or breaks an obligation."""
        return bool(self.reader_disagreements) or self.obligations.broken

    @property
    def passed(self) -> bool:
        """No reader fault, no writer fault (stray writes, modified inputs; expected failures included), and
        every writer not expected to fail meets --min-recall on every non-vacuous row."""
        return not self.reader_fault and not self.faults and all(col.expect_fail or not col.failing(self.config) for col in self.columns)

    def verdict_line(self) -> str:
        c = self.config
        what = (f"top-{c.topk} parity of {', '.join(col.name for col in self.columns)} read by {self.reader.name}"
                if self.columns else  # else the reader alone, on the baseline's bytes
                f"top-{c.topk} of {self.reader.name} reading {self.baseline.name}'s bytes against the exact reader")
        faults = ("; READER FAULT" if self.reader_fault else "") + "".join(f"; {f}" for f in self.faults)
        return f"{'PASS' if self.passed else 'FAIL'}: {what}, ctx {min(c.ctx)}-{max(c.ctx)}{faults}"

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
        if all(c.vacuous(ctx) for ctx in c.ctx):
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

        def record(ctx: int, writer: str, m: Metrics) -> dict:  # a max_rel not finite (NaN, inf logits): null
            out = {"ctx": ctx, "writer": writer, **m.to_dict()}
            return {**out, "max_rel": out["max_rel"] if math.isfinite(out["max_rel"]) else None}

        check = None if self.reader_check is None else [record(ctx, self.baseline.name, m)
                                                        for ctx, m in zip(c.ctx, self.reader_check)]
        return json_safe({
            "spec": self.spec.to_dict(),
            "inputs": {"source": self.source, "heads": self.heads, "tokens": c.max_ctx},
            "config": c.to_dict(),
            "faults": list(self.faults),
            "baseline": {"name": self.baseline.name, "description": self.baseline.description,
                         "emulated": self.baseline.emulated, "provenance": self.baseline.provenance},
            "writers": [{"name": col.name, "description": col.description, "emulated": col.emulated,
                         "expect_fail": col.expect_fail, "passed": not col.failing(c), "provenance": col.provenance}
                        for col in self.columns],
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


@dataclass(frozen=True)
class Batch:
    """The reader's arguments for one batch of len(ctx) sequences sharing the written blocks."""

    q_codes: torch.Tensor  # uint8 [B, next_n, H, D]
    q_fp8: torch.Tensor  # the same bytes as the spec's FP8 dtype
    weights: torch.Tensor  # fp32 [B*next_n, H]
    context_lens: torch.Tensor  # int32 [B]
    block_tables: torch.Tensor  # int32 [B, num_blocks]
    max_model_len: int

    @property
    def args(self) -> tuple:
        """What a reader takes after its queries and cache."""
        return self.weights, self.context_lens, self.block_tables, self.max_model_len


def make_batch(spec: CacheSpec, config: ParityConfig, inputs: QueryInputs, device: torch.device) -> Batch:
    rows = len(config.ctx)
    q_codes = quantize_q(inputs.q.to(device), spec.fp8).unsqueeze(0).expand(rows, -1, -1, -1).contiguous()
    return Batch(
        q_codes, q_codes.view(spec.fp8.torch_dtype()),
        inputs.weights.to(device, torch.float32).repeat(rows, 1).contiguous(),
        torch.tensor(config.ctx, dtype=torch.int32, device=device),
        inputs.block_table.to(device).unsqueeze(0).expand(rows, -1).contiguous(), config.max_ctx,
    )


def score(config: ParityConfig, logits: torch.Tensor, truth: torch.Tensor) -> tuple[Metrics, ...]:
    """One Metrics per ctx row of a batched reader output against the batched truth."""
    n = config.next_n
    return tuple(
        compare_logits(logits[b * n : (b + 1) * n], truth[b * n : (b + 1) * n], visible_tokens(c, n), config.topk,
                       rtol=config.rtol, atol=config.atol)
        for b, c in enumerate(config.ctx)
    )


def run_parity(spec: CacheSpec, config: ParityConfig, *, baseline: Producer, writers: list[Producer],
               reader: Reader, inputs: QueryInputs, device: torch.device,
               progress: Progress | None = None) -> ParityResult:
    """Every writer once on max(ctx) tokens, the reader once per writer, scored against the truth."""
    progress = progress or (lambda label, done, total: None)
    total, done, timings = 2 + 2 * len(writers) + (0 if reader.exact else 1), 0, {}
    names = [w.name for w in writers]
    if len(set(names)) != len(names):
        raise UsageError(f"--writers {','.join(names)}: each writer may be named once")
    unknown = sorted(config.expect_fail - set(names))
    if unknown:
        raise UsageError(f"--expect-fail {', '.join(unknown)}: not among the writers ({', '.join(w.name for w in writers)})")
    reader.check(spec, device)
    k = inputs.k[: config.max_ctx].to(device)
    written = Inputs(k, inputs.slot_mapping(config.max_ctx, spec.block_size).to(device), inputs.source)

    def step(label: str, fn):
        nonlocal done
        progress(label, done, total)
        start = time.perf_counter()
        out = fn()
        timings[label] = time.perf_counter() - start
        done += 1
        progress(label, done, total)
        return out

    # run_producer: the writer as it ran (an isolated one: with the description its child reported)
    base, baseline = step(f"write {baseline.name}", lambda: producers.run_producer(baseline, spec, written, device))
    ran_writers = [step(f"write {w.name}", lambda w=w: producers.run_producer(w, spec, written, device))
                   for w in writers]
    caches, writers = [c for c, _ in ran_writers], [w for _, w in ran_writers]
    batch = make_batch(spec, config, inputs, device)
    truth = step("truth (reference reader on the baseline's bytes)", lambda: reference_reader.paged_logits(
        spec, batch.q_codes, base.flat, *batch.args))
    if not torch.isfinite(truth.masked_fill(truth == float("-inf"), 0)).all():
        raise InputError(f"the baseline {baseline.name!r} wrote bytes that decode to inf/NaN logits: no truth to rank by")
    ran, findings = reader, Findings()  # `ran`: the reader as it ran (isolated: with what its child reported)

    def read(label: str, cache):
        nonlocal ran, findings
        kv = cache.cache.view(spec.num_blocks, spec.block_size, 1, spec.row_bytes)  # the reader's view
        logits, ran, outside = step(label, lambda: run_reader_guarded(reader, batch.q_fp8, kv, *batch.args))
        if not reader.exact:  # the exact reader is the truth; every other one owes -inf where a row may not look
            findings = findings + Findings(*leaks(logits, batch.context_lens, config.next_n), *outside)
        return logits

    columns = [Column(w.name, w.description, w.emulated, w.name in config.expect_fail,
                      score(config, read(f"read {w.name}", cache), truth), cache.faults(f"writer {w.name!r}"),
                      w.provenance)
               for w, cache in zip(writers, caches)]
    check, read_as = None, None
    if not reader.exact:
        logits = read(f"read {baseline.name} (reader check)", base)
        check = score(config, logits, truth)
        if any(not m.vacuous and m.lost for m in check):
            read_as = step("which layout the reader reads", lambda: layout_read(spec, config, batch, base, logits))
    return ParityResult(spec, config, inputs.source, inputs.heads, str(device), baseline, ran, tuple(columns),
                        check, timings, findings, read_as, base.faults(f"baseline {baseline.name!r}"))


def layout_read(spec: CacheSpec, config: ParityConfig, batch: Batch, base, logits: torch.Tensor) -> str | None:
    """The layout the exact reader must assume to agree with a reader's logits on the baseline's bytes (every
    non-vacuous row at recall 1, near-ties aside), where one other than the spec's does; None otherwise."""
    for layout in Layout:
        if layout is spec.layout or (layout is Layout.SHUFFLE and spec.block_size % 16):
            continue
        other = spec.replace(layout=layout)
        truth = reference_reader.paged_logits(other, batch.q_codes, base.flat, *batch.args)
        if all(m.vacuous or not m.lost for m in score(config, logits, truth)):
            return layout.value
    return None


@dataclass(frozen=True)
class ReaderCase:  # of the default reader check: every obligation over the cases real readers get wrong
    next_n: int
    block_size: int
    layout: Layout

    @property
    def label(self) -> str:
        return f"next_n {self.next_n}, block {self.block_size}, {self.layout.value}"


# next_n 1 and 2 (MTP masks), block 1 (where every layout coincides) and 64, planar in both value orders
READER_CASES = tuple(ReaderCase(n, block, layout) for n in (1, 2)
                     for block, layout in ((1, Layout.LINEAR), (64, Layout.LINEAR), (64, Layout.SHUFFLE)))


def check_reader(reader_for: Callable[[CacheSpec], Reader], *, cases=READER_CASES, ctx=(300, 1100), topk: int = 256,
                 heads: int = 4, head_dim: int = 128, seed: int = 0, fp8: FP8Format = FP8Format.E4M3FN,
                 scale_fmt: ScaleFormat = ScaleFormat.UE8M0, device=torch.device("cpu"),
                 ) -> list[tuple[ReaderCase, ParityResult]]:
    """The reader (made for each case's spec by `reader_for`) on the reference writer's bytes of every case:
    recall against the exact reader, near-ties told apart, masked positions, writes outside its rows. A reader
    reads one layout: it agrees on the cases of that layout and is a reader fault on the others."""
    results = []
    for case in cases:
        config = ParityConfig(ctx=tuple(ctx), topk=topk, next_n=case.next_n)
        spec = cache_spec(config, CacheSpec(block_size=case.block_size, head_dim=head_dim, quant_block_size=head_dim,
                                            fp8=fp8, scale_fmt=scale_fmt, layout=case.layout))
        inputs = generate(spec, config, heads=heads, seed=seed, shuffled=True)
        results.append((case, run_parity(spec, config, baseline=producers.resolve("reference"), writers=[],
                                         reader=reader_for(spec), inputs=inputs, device=device)))
    return results
