"""Top-K parity, end to end: writer -> cache bytes -> reader -> indexer logits -> top-K (the seed's
second and third tables; docs/NUMERICS.md, README "Top-K parity").

Each writer runs ONCE on max(ctx) tokens of one paged sequence; the sequence of each ctx row is the
first ctx tokens of it (the same blocks, the same block table). The reader runs once per writer on a
batch of len(ctx) sequences, one per row. The truth is fp8check's reference reader on the baseline's
bytes (float64); the metrics are defined in readers/metrics.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from ..core.errors import InputError, UsageError
from ..core.inputs import Inputs
from ..producers import reader_reference as reference_reader
from ..core.metrics import Metrics, compare_logits, quantize_q, visible_tokens
from ..producers.obligations import Findings, leaks
from ..core.producer import Reader
from ..producers.readers import run_reader_guarded
from ..core.spec import CacheSpec, FP8Format, Layout, ScaleFormat
from ..producers import registry as producers
from ..producers.registry import Producer
from .parity_inputs import ParityConfig, QueryInputs, cache_spec, generate
from .parity_result import Column, ParityResult, Progress


# ---- the sweep ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """The reader's arguments for one batch of len(ctx) sequences sharing the written blocks."""

    q_codes: torch.Tensor  # uint8 [B, next_n, H, D]
    q_fp8: torch.Tensor  # the same bytes as the spec's FP8 dtype
    weights: torch.Tensor  # fp32 [B*next_n, H]
    context_lens: torch.Tensor  # int32 [B]
    block_tables: torch.Tensor  # int32 [B, num_blocks]
    max_model_len: int


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


def _kv(buffer, spec: CacheSpec) -> torch.Tensor:
    """The reader's view of a written cache: uint8 [num_blocks, block_size, 1, row_bytes]."""
    return buffer.cache.view(spec.num_blocks, spec.block_size, 1, spec.row_bytes)


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
    args = (batch.weights, batch.context_lens, batch.block_tables, batch.max_model_len)
    truth = step("truth (reference reader on the baseline's bytes)", lambda: reference_reader.paged_logits(
        spec, batch.q_codes, base.flat, *args))
    if not torch.isfinite(truth.masked_fill(truth == float("-inf"), 0)).all():
        raise InputError(f"the baseline {baseline.name!r} wrote bytes that decode to inf/NaN logits: no truth to rank by")
    columns, ran = [], reader  # `ran`: the reader as it ran (an isolated one: with what its child reported)
    findings = Findings()

    def read(label: str, cache):
        nonlocal ran, findings
        logits, ran, outside = step(label, lambda: run_reader_guarded(reader, batch.q_fp8, _kv(cache, spec), *args))
        if not reader.exact:  # the exact reader is the truth; every other one owes -inf where a row may not look
            findings = findings + Findings(*leaks(logits, batch.context_lens, config.next_n), *outside)
        return logits

    for writer, cache in zip(writers, caches):
        logits = read(f"read {writer.name}", cache)
        columns.append(Column(writer.name, writer.description, writer.emulated, writer.name in config.expect_fail,
                              score(config, logits, truth), cache.faults(f"writer {writer.name!r}")))
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
    args = (batch.weights, batch.context_lens, batch.block_tables, batch.max_model_len)
    for layout in Layout:
        if layout is spec.layout or (layout is Layout.SHUFFLE and spec.block_size % 16):
            continue
        other = spec.replace(layout=layout)
        truth = reference_reader.paged_logits(other, batch.q_codes, base.flat, *args)
        if all(m.vacuous or not m.lost for m in score(config, logits, truth)):
            return layout.value
    return None


# ---- the default reader check: every obligation over the cases real readers get wrong -------------------------


@dataclass(frozen=True)
class ReaderCase:
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
        reference = producers.resolve("reference")
        results.append((case, run_parity(spec, config, baseline=reference, writers=[], reader=reader_for(spec),
                                         inputs=inputs, device=device)))
    return results
