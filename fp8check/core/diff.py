"""Block-by-block byte diff of two caches, on their device: per-block counts stay tensors there, one host
transfer brings back the totals and the first mismatch, `BlockDiff` records are built for shown rows only."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import fp8
from .cache import CacheBuffer
from .spec import CacheSpec, Coordinate, Region


@dataclass(frozen=True)
class BlockDiff:
    block: int
    value_diff: int
    value_total: int
    scale_diff: int
    scale_total: int

    @property
    def diff(self) -> int:
        return self.value_diff + self.scale_diff


@dataclass(frozen=True)
class Mismatch:
    """One differing byte: where, both bytes, and what they mean."""

    coordinate: Coordinate
    baseline_byte: int
    candidate_byte: int
    # value region: the FP8 values of the two bytes; scale region: the two fp32 scales holding them.
    baseline_value: float
    candidate_value: float
    fp8: str

    def to_dict(self) -> dict:
        c = self.coordinate
        return {"block": c.block, "token": c.token, "dim": c.dim, "scale_group": c.group,
                "region": c.region.value, "byte_in_block": c.byte_in_block,
                "baseline_byte": f"0x{self.baseline_byte:02x}", "candidate_byte": f"0x{self.candidate_byte:02x}",
                "baseline_value": self.baseline_value, "candidate_value": self.candidate_value, "fp8": self.fp8}

    def describe(self) -> str:
        what = "fp8" if self.coordinate.region is Region.VALUE else "fp32 scale"
        a, b = f"{self.baseline_value:g}", f"{self.candidate_value:g}"
        if a == b and self.baseline_byte != self.candidate_byte:  # scales an ulp apart print alike at 6 digits
            a, b = f"{self.baseline_value:.9g}", f"{self.candidate_value:.9g}"
        return (f"{self.coordinate.describe()}: baseline 0x{self.baseline_byte:02x} ({what} {a}),"
                f" candidate 0x{self.candidate_byte:02x} ({what} {b})")


@dataclass(frozen=True)
class DiffResult:
    spec: CacheSpec
    value_diff: torch.Tensor  # int64 [num_blocks]: differing value bytes per block (on the caches' device)
    scale_diff: torch.Tensor  # int64 [num_blocks]: differing scale bytes per block
    guard_diff: int  # bytes changed outside the cache (before/after the buffer handed over)
    cache_diff: int  # differing bytes inside the cache (value + scale regions)
    differing_blocks: int  # blocks with at least one differing byte
    first_mismatch: Mismatch | None

    @property
    def num_blocks(self) -> int:
        return self.spec.num_blocks

    @property
    def diff_bytes(self) -> int:
        return self.cache_diff + self.guard_diff

    @property
    def total_bytes(self) -> int:
        return self.spec.num_blocks * (self.spec.value_bytes + self.spec.scale_bytes)

    @property
    def identical(self) -> bool:
        return self.diff_bytes == 0

    def block_diff(self) -> torch.Tensor:
        """int64 [num_blocks]: differing bytes per block, both regions."""
        return self.value_diff + self.scale_diff

    def block(self, index: int) -> BlockDiff:
        return self.rows([index])[0]

    def all_rows(self) -> list[BlockDiff]:
        return self.rows(range(self.num_blocks))

    def rows(self, indices) -> list[BlockDiff]:
        """Records of the given blocks (one host transfer for all of them)."""
        index = torch.as_tensor(list(indices), dtype=torch.int64)
        values, scales = (counts.cpu()[index].tolist() for counts in (self.value_diff, self.scale_diff))
        return [BlockDiff(int(i), v, self.spec.value_bytes, s, self.spec.scale_bytes)
                for i, v, s in zip(index.tolist(), values, scales)]


def count_true(mask: torch.Tensor) -> torch.Tensor:
    """int64 [N]: the True count of each row of a bool [N, M] mask (rows may be a strided slice).

    `count_nonzero(dim=1)` costs ~390 ms for 16384 x 8192 on 2 CPU cores. Reading 8 bools as one int64
    sums 8 byte lanes at once; rows are split into chunks of <= 255 words so that no lane passes 255
    and no carry crosses lanes; the lanes are then folded: ~5 ms for the same mask.
    """
    rows, m = mask.shape
    words = m // 8
    chunk = next((c for c in range(min(255, words), 0, -1) if words % c == 0), 0)
    if m % 8 or not chunk:
        return torch.count_nonzero(mask, dim=1)
    try:
        lanes = mask.reshape(rows, words // chunk, chunk * 8).view(torch.int64).sum(dim=2)
    except RuntimeError:  # a slice whose row stride or offset is not 8-byte aligned
        return torch.count_nonzero(mask, dim=1)
    lanes = (lanes & 0x00FF00FF00FF00FF) + ((lanes >> 8) & 0x00FF00FF00FF00FF)
    lanes = (lanes & 0x0000FFFF0000FFFF) + ((lanes >> 16) & 0x0000FFFF0000FFFF)
    return ((lanes & 0xFFFFFFFF) + (lanes >> 32)).sum(dim=1)


def mismatch_at(spec: CacheSpec, baseline: torch.Tensor, candidate: torch.Tensor, flat_index: int) -> Mismatch:
    """The record of byte `flat_index` of two [num_blocks, block_bytes] caches."""
    index = int(flat_index)
    start = index - index % spec.block_bytes + spec.word_start(index % spec.block_bytes)
    return _mismatch_from(spec, index, *(c.reshape(-1)[start : start + 4].tolist() for c in (baseline, candidate)))


def _mismatch_from(spec: CacheSpec, index: int, window_a: list[int], window_b: list[int]) -> Mismatch:
    """The record of byte `index` from 4-byte windows of both caches at its scale word's start (or at
    the byte itself in the value region): built from numbers already on the host, no device reads."""
    coordinate = spec.locate(index)
    at = coordinate.byte_in_block - spec.word_start(coordinate.byte_in_block)
    a, b = window_a[at], window_b[at]
    if coordinate.region is Region.VALUE:
        va, vb = fp8.decode_byte(a, spec.fp8), fp8.decode_byte(b, spec.fp8)
    else:
        va, vb = (fp8.decode_scale_word(bytes(w), spec.scale_fmt) for w in (window_a, window_b))
    return Mismatch(coordinate, a, b, va, vb, spec.fp8.value)


def _block_counts(spec: CacheSpec, a: torch.Tensor, b: torch.Tensor):
    """(value_diff, scale_diff, first differing offset per block): the vectorized byte-lane count (the
    CPU, and a GPU without Triton)."""
    differs = a != b
    # planar: the scale region as a strided view, which scale_words' reshape to [*, 4] would copy
    scales = (differs[:, spec.value_bytes : spec.value_bytes + spec.scale_bytes] if spec.layout.planar
              else spec.scale_words(differs).reshape(differs.shape[0], -1))
    # argmax returns the first maximal element: the first differing byte of each block (0 in an equal
    # block, which is never looked at)
    first = torch.argmax(differs.view(torch.uint8), dim=1)
    return count_true(spec.value_part(differs)), count_true(scales), first


def diff_caches(spec: CacheSpec, baseline: CacheBuffer, candidate: CacheBuffer) -> DiffResult:
    """Counts per block and region, guard bytes and the first mismatch, with one host transfer. Identical
    buffers (the common case in CI) cost one `torch.equal` on the CPU; on CUDA the one-pass kernel is about
    as fast and needs no second transfer, so it runs directly (docs/PERFORMANCE.md)."""
    a, b = baseline.flat, candidate.flat
    if not a.is_cuda and torch.equal(baseline.buffer, candidate.buffer):
        zeros = torch.zeros(spec.num_blocks, dtype=torch.int64, device=a.device)
        return DiffResult(spec, zeros, zeros, 0, 0, 0, None)
    if a.is_cuda and spec.layout.planar:
        try:
            from .diff_kernel import block_diff, summary
        except ImportError:  # no Triton on this GPU machine: the torch ops below run there too
            pass
        else:  # one pass over both caches, then totals, guards and windows in one more program; one transfer
            value_diff, scale_diff, first = block_diff(a, b, spec.value_bytes, spec.scale_bytes)
            numbers = summary(value_diff, scale_diff, first, baseline.buffer, candidate.buffer,
                              baseline.guard_bytes, spec.block_bytes, spec.value_bytes).tolist()
            return from_summary(spec, value_diff, scale_diff, numbers)
    value_diff, scale_diff, first = _block_counts(spec, a, b)
    per_block = value_diff + scale_diff
    differing = per_block > 0
    guard = (baseline.guards != candidate.guards).sum()
    # the first differing block and byte, and 4-byte windows of both caches there (the byte itself, or
    # the whole fp32 scale word it belongs to), all in the same transfer as the totals
    block = torch.argmax(differing.to(torch.uint8))
    offset = first[block]
    word = spec.word_start(offset)
    at = (block * spec.block_bytes + word + torch.arange(4, device=a.device)).clamp(max=a.numel() - 1)
    window = torch.cat([a.reshape(-1)[at], b.reshape(-1)[at]]).to(torch.int64)
    totals = torch.stack([per_block.sum(), differing.sum(), guard, block, offset])  # all int64
    return from_summary(spec, value_diff, scale_diff, torch.cat([totals, window]).tolist())


def from_summary(spec: CacheSpec, value_diff: torch.Tensor, scale_diff: torch.Tensor, numbers: list[int]) -> DiffResult:
    """The DiffResult from the per-block counts and the 13 numbers of the one transfer (see diff_kernel.summary)."""
    cache_diff, differing_blocks, guard_diff, block, offset = numbers[:5]
    first_mismatch = (_mismatch_from(spec, block * spec.block_bytes + offset, numbers[5:9], numbers[9:13])
                      if cache_diff else None)
    return DiffResult(spec, value_diff, scale_diff, guard_diff, cache_diff, differing_blocks, first_mismatch)

