"""Top-K parity, end to end: writer -> cache bytes -> reader -> indexer logits -> top-K (the seed's
second and third tables; SPEC.md section 7, README "Top-K parity").

Each writer runs ONCE on max(ctx) tokens of one paged sequence; the sequence of each ctx row is the
first ctx tokens of it (the same blocks, the same block table). The reader runs once per writer on a
batch of len(ctx) sequences, one per row. The truth is fp8check's reference reader on the baseline's
bytes (float64); the metrics are defined in readers/metrics.py.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from .errors import ConfigError, InputError, UsageError
from .inputs import Distribution, Inputs, load, make_k
from .readers import reference as reference_reader
from .readers.metrics import (
    DEFAULT_ATOL, DEFAULT_RTOL, Metrics, compare_logits, is_vacuous, quantize_q, visible_tokens,
)
from .readers.obligations import Findings, leaks
from .readers.registry import Reader, run_reader_guarded
from .spec import CacheSpec, FP8Format, Layout, ScaleFormat
from .writers import registry as producers
from .writers.registry import Producer


DEFAULT_CTX = (128, 512, 1024, 2048, 2049, 4096, 8192, 16384)  # the seed's rows
DEFAULT_WRITERS = ("triton-buggy", "triton")  # the seed's BUGGY and FIXED columns
DEFAULT_HEADS = 64  # DeepSeek-V3.2's indexer

Progress = Callable[[str, int, int], None]  # (what runs now, steps done, steps in all)


@dataclass(frozen=True)
class ParityConfig:
    ctx: tuple[int, ...] = DEFAULT_CTX
    topk: int = 2048
    next_n: int = 1
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    min_recall: float = 1.0
    expect_fail: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.ctx or any(c < 1 for c in self.ctx):
            raise UsageError(f"--ctx must list positive token counts, got {','.join(map(str, self.ctx)) or 'nothing'}")
        if self.next_n < 1 or min(self.ctx) < self.next_n:
            raise UsageError(f"--next-n {self.next_n}: must be >= 1 and <= the smallest --ctx ({min(self.ctx)})")
        if self.topk < 1:
            raise UsageError(f"--topk must be >= 1, got {self.topk}")
        if not 0.0 <= self.min_recall <= 1.0:
            raise UsageError(f"--min-recall must lie in [0, 1], got {self.min_recall}")
        if self.rtol < 0 or self.atol < 0:
            raise UsageError(f"--rtol and --atol must be >= 0, got {self.rtol} and {self.atol}")

    @property
    def max_ctx(self) -> int:
        return max(self.ctx)

    def vacuous(self, ctx: int) -> bool:
        """Every query row of a ctx-token sequence sees <= K tokens: all are selected, recall is 1 for anyone."""
        return is_vacuous(visible_tokens(ctx, self.next_n), self.topk)

    def to_dict(self) -> dict:
        return {"ctx": list(self.ctx), "topk": self.topk, "next_n": self.next_n, "rtol": self.rtol,
                "atol": self.atol, "min_recall": self.min_recall, "expect_fail": sorted(self.expect_fail)}


def cache_spec(config: ParityConfig, *, block_size: int, head_dim: int, quant_block_size: int | None,
               fp8: FP8Format, scale_fmt: ScaleFormat, layout: Layout | None) -> CacheSpec:
    """The paged cache of one max(ctx)-token sequence: just enough blocks; qbs defaults to head_dim (one
    scale per token, what vLLM's Triton writer and its readers assume)."""
    blocks = -(-config.max_ctx // block_size) if isinstance(block_size, int) and block_size > 0 else 1
    return CacheSpec(num_blocks=blocks, block_size=block_size, head_dim=head_dim,
                     quant_block_size=quant_block_size or head_dim, fp8=fp8, scale_fmt=scale_fmt, layout=layout)


# ---- inputs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryInputs:
    """One sequence: K rows, the query of each MTP row, the head weights and the block table."""

    k: torch.Tensor  # bf16 [T, head_dim], T >= max(ctx)
    q: torch.Tensor  # bf16 [next_n, heads, head_dim]
    weights: torch.Tensor  # fp32 [next_n, heads]
    block_table: torch.Tensor  # int32 [num_blocks]: the physical block of each logical block
    source: str

    @property
    def heads(self) -> int:
        return self.q.shape[1]

    def slot_mapping(self, num_tokens: int, block_size: int) -> torch.Tensor:
        token = torch.arange(num_tokens, device=self.block_table.device)
        return self.block_table.long()[token // block_size] * block_size + token % block_size


def make_block_table(num_blocks: int, shuffled: bool, generator: torch.Generator) -> torch.Tensor:
    """Blocks in order, or a random permutation (a paged cache hands out blocks in any order)."""
    table = torch.randperm(num_blocks, generator=generator) if shuffled else torch.arange(num_blocks)
    return table.to(torch.int32)


def generate(spec: CacheSpec, config: ParityConfig, *, heads: int, seed: int, shuffled: bool,
             distribution: Distribution = Distribution.NORMAL) -> QueryInputs:
    """Seeded K (inputs.make_k), q ~ N(0, 1) and positive weights of size (heads * head_dim)^-1/2, so the
    logits are O(1) (DEFAULT_ATOL is in those units). Generated on the CPU: every device sees the same bits."""
    generator = torch.Generator().manual_seed(seed)
    table = make_block_table(spec.num_blocks, shuffled, generator)
    k = make_k(config.max_ctx, spec.head_dim, distribution, generator, quant_block_size=spec.quant_block_size,
               fp8=spec.fp8)
    q = torch.randn(config.next_n, heads, spec.head_dim, generator=generator).to(torch.bfloat16)
    weights = torch.rand(config.next_n, heads, generator=generator) * (heads * spec.head_dim) ** -0.5
    order = "shuffled" if shuffled else "in-order"
    return QueryInputs(k, q, weights, table, f"{distribution.value} K, {heads} heads, {order} block table, seed {seed}")


def _per_row(path: Path, name: str, tensor: torch.Tensor, shape: tuple[int, ...], next_n: int, dtype) -> torch.Tensor:
    """`tensor` as [next_n, *shape]: given per MTP row, or once for all rows."""
    if tensor.dtype != dtype or tuple(tensor.shape) not in (shape, (next_n, *shape)):
        wanted = " or ".join(str(list(s)) for s in (shape, (next_n, *shape)))
        raise InputError(f"{path}: '{name}' must be {dtype} {wanted}, got {tensor.dtype} {list(tensor.shape)}")
    return tensor.expand(next_n, *shape).contiguous()


def read(path: Path, spec: CacheSpec, config: ParityConfig, *, heads: int | None, seed: int,
         shuffled: bool) -> QueryInputs:
    """`k` (bf16 [T, D]), `q` (bf16 [H, D] or [next_n, H, D]) and `weights` (fp32 [H] or [next_n, H])."""
    tensors = load(path)
    for name in ("k", "q", "weights"):
        if name not in tensors:
            raise InputError(f"{path}: has no tensor {name!r} (needs k, q and weights)")
    k, q = tensors["k"], tensors["q"]
    if k.dtype != torch.bfloat16 or k.dim() != 2 or k.shape[1] != spec.head_dim or k.shape[0] < config.max_ctx:
        raise InputError(f"{path}: 'k' must be bf16 [>= {config.max_ctx}, {spec.head_dim}] (max --ctx, --head-dim),"
                         f" got {k.dtype} {list(k.shape)}")
    file_heads = q.shape[-2] if q.dim() >= 2 else -1
    if heads is not None and heads != file_heads:
        raise InputError(f"{path}: 'q' has {file_heads} heads but --heads is {heads}")
    q = _per_row(path, "q", q, (file_heads, spec.head_dim), config.next_n, torch.bfloat16)
    weights = _per_row(path, "weights", tensors["weights"], (file_heads,), config.next_n, torch.float32)
    table = make_block_table(spec.num_blocks, shuffled, torch.Generator().manual_seed(seed))
    return QueryInputs(k[: config.max_ctx].contiguous(), q, weights, table, f"replayed from {path.name}")


# ---- results ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One writer's rows (one Metrics per ctx of the config, in order)."""

    name: str
    description: str
    emulated: bool
    expect_fail: bool
    rows: tuple[Metrics, ...]

    def failing(self, config: ParityConfig) -> list[tuple[int, float]]:
        """(ctx, recall) of the non-vacuous rows below --min-recall."""
        return [(c, m.recall) for c, m in zip(config.ctx, self.rows)
                if not m.vacuous and m.recall < config.min_recall and not m.tie]


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
        """No reader fault, and every writer not expected to fail meets --min-recall on every non-vacuous row."""
        return not self.reader_fault and all(col.expect_fail or not col.failing(self.config) for col in self.columns)


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
                              score(config, logits, truth)))
    check = None
    if not reader.exact:
        check = score(config, read(f"read {baseline.name} (reader check)", base), truth)
    return ParityResult(spec, config, inputs.source, inputs.heads, str(device), baseline, ran, tuple(columns),
                        check, timings, findings)


# ---- configs ------------------------------------------------------------------------------------------

# Keys a [parity] section may set, with the CLI option (dest name) each one stands for.
PARITY_KEYS = {
    "block": "block_size", "head_dim": "head_dim", "qbs": "quant_block_size", "fp8": "fp8", "scale_fmt": "scale_fmt",
    "layout": "layout", "seed": "seed", "slots": "slots", "inputs": "distribution", "device": "device",
    "baseline": "baseline", "writers": "writers", "reader": "reader", "ctx": "ctx", "topk": "topk",
    "next_n": "next_n", "heads": "heads", "rtol": "rtol", "atol": "atol", "min_recall": "min_recall",
    "expect_fail": "expect_fail",
}
LIST_KEYS = {"writers", "ctx"}  # TOML lists, given on the command line as comma-separated text


def read_config(path: Path) -> dict:
    """The [parity] section of a TOML file, as CLI option names -> values (lists as the CLI's text)."""
    from .config import find, load_toml

    path = find(path)
    data = load_toml(path)
    section = data.get("parity")
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: needs a [parity] section")
    unknown = sorted(set(section) - set(PARITY_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [parity]: {', '.join(unknown)}; known: {', '.join(PARITY_KEYS)}")
    out = {}
    for key, value in section.items():
        if key in LIST_KEYS and isinstance(value, list):
            value = ",".join(str(v) for v in value)
        elif key == "expect_fail":
            value = tuple(value) if isinstance(value, list) else (value,)
        out[PARITY_KEYS[key]] = value
    return out


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
        spec = cache_spec(config, block_size=case.block_size, head_dim=head_dim, quant_block_size=None, fp8=fp8,
                          scale_fmt=scale_fmt, layout=case.layout)
        inputs = generate(spec, config, heads=heads, seed=seed, shuffled=True)
        reference = producers.resolve("reference")
        results.append((case, run_parity(spec, config, baseline=reference, writers=[], reader=reader_for(spec),
                                         inputs=inputs, device=device)))
    return results
