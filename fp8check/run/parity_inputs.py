"""A top-K parity run's configuration and inputs: the contexts, heads and top-K, the cache they need, and
the query, weights, block table and K, drawn from a seed or read from a file (parity.py runs them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from . import options
from ..core.errors import InputError, UsageError
from ..core.inputs import Distribution, load, make_k
from ..core.metrics import DEFAULT_ATOL, DEFAULT_RTOL, is_vacuous, visible_tokens
from ..core.spec import CacheSpec

DEFAULT_HEADS = 64  # DeepSeek-V3.2's indexer


@dataclass(frozen=True)
class ParityConfig:
    ctx: tuple[int, ...] = options.PARITY["ctx"].default  # the seed's rows
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


def cache_spec(config: ParityConfig, spec: CacheSpec) -> CacheSpec:
    """The paged cache of one max(ctx)-token sequence: just enough blocks of `spec`'s shape."""
    return spec.replace(num_blocks=-(-config.max_ctx // spec.block_size))


def memory_bytes(spec: CacheSpec, config: ParityConfig, *, heads: int, writers: int) -> int:
    """Memory a parity run needs at its peak, estimated before anything is allocated (prepare_parity refuses
    a run that cannot fit): every column's cache with a compare's working set, K as it is drawn, the
    queries, the exact reader's float64 keys and per-head scores of the longest sequence, and the float64
    logits and top-K of every sequence's rows for the truth, the reader check and each column."""
    from ..core.cache import buffer_bytes, input_bytes

    ctx, rows, columns = config.max_ctx, len(config.ctx) * config.next_n, writers + 3
    caches = (writers + 4) * buffer_bytes(spec)
    queries = len(config.ctx) * config.next_n * heads * spec.head_dim * 16  # drawn in fp32, decoded in float64
    reading = 32 * ctx * spec.head_dim + 24 * config.next_n * heads * ctx
    logits = columns * rows * 8 * (ctx + min(config.topk, ctx))
    return caches + input_bytes(spec, ctx) + queries + reading + logits


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
