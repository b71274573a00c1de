"""The one-pass block diff on CUDA: one Triton program per cache block reads both caches once, in
CHUNK-byte steps, counting differing value and scale bytes and the first differing offset; diff.py
brings back the totals in one transfer. Imported only when the caches live on a GPU."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

CHUNK = 2048  # bytes per step: 16 per thread with 4 warps, one 128-bit load per cache


@triton.jit
def _block_diff(a_ptr, b_ptr, value_out, scale_out, first_out, block_bytes, value_bytes, scale_end,
                CHUNK: tl.constexpr):
    block = tl.program_id(0)
    base = block.to(tl.int64) * block_bytes
    value = tl.full([CHUNK], 0, tl.int32)
    scale = tl.full([CHUNK], 0, tl.int32)
    first = tl.full([CHUNK], 2147483647, tl.int32)
    for start in range(0, block_bytes, CHUNK):
        offset = start + tl.arange(0, CHUNK)
        inside = offset < block_bytes
        x = tl.load(a_ptr + base + offset, mask=inside, other=0)
        y = tl.load(b_ptr + base + offset, mask=inside, other=0)
        differs = (x != y) & inside
        value += (differs & (offset < value_bytes)).to(tl.int32)
        scale += (differs & (offset >= value_bytes) & (offset < scale_end)).to(tl.int32)
        first = tl.minimum(first, tl.where(differs, offset, 2147483647))
    # tl.reduce with the standard combiners rather than tl.sum / tl.min (@jit helpers the interpreter
    # can call only when TRITON_INTERPRET was set before Triton's import; see producers/triton.py)
    tl.store(value_out + block, tl.reduce(value, 0, tl.standard._sum_combine).to(tl.int64))
    tl.store(scale_out + block, tl.reduce(scale, 0, tl.standard._sum_combine).to(tl.int64))
    first_offset = tl.reduce(first, 0, tl.standard._elementwise_min)
    tl.store(first_out + block, tl.minimum(first_offset, block_bytes).to(tl.int64))


def _kernel(jitted, device: torch.device):
    """`jitted` compiled on a GPU; under Triton's interpreter on the CPU (tests prove the counts there)."""
    if device.type != "cpu":
        return jitted
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(jitted.fn)


def block_diff(a: torch.Tensor, b: torch.Tensor, value_bytes: int, scale_bytes: int):
    """(value_diff, scale_diff, first_offset) int64 [num_blocks] of two uint8 [num_blocks, block_bytes]
    caches; first_offset is block_bytes where a block has no differing byte."""
    num_blocks, block_bytes = a.shape
    value, scale, first = (torch.empty(num_blocks, dtype=torch.int64, device=a.device) for _ in range(3))
    _kernel(_block_diff, a.device)[(num_blocks,)](a, b, value, scale, first, block_bytes, value_bytes,
                                                  value_bytes + scale_bytes, CHUNK=CHUNK, num_warps=4)
    return value, scale, first


BLOCKS = 1024  # per-block counts summed per step
GUARD_CHUNK = 2048  # guard bytes compared per step


@triton.jit
def _summary(value_ptr, scale_ptr, first_ptr, a_ptr, b_ptr, out_ptr, num_blocks, guard, cache_bytes, block_bytes,
             value_bytes, BLOCKS: tl.constexpr, GUARD_CHUNK: tl.constexpr):
    # totals over the per-block counts: differing bytes, differing blocks, the first differing block
    total = tl.full([BLOCKS], 0, tl.int64)
    count = tl.full([BLOCKS], 0, tl.int64)
    first_block = tl.full([BLOCKS], 2147483647, tl.int32)
    for start in range(0, num_blocks, BLOCKS):
        i = start + tl.arange(0, BLOCKS)
        inside = i < num_blocks
        d = tl.load(value_ptr + i, mask=inside, other=0) + tl.load(scale_ptr + i, mask=inside, other=0)
        total += d
        count += (d > 0).to(tl.int64)
        first_block = tl.minimum(first_block, tl.where(d > 0, i, 2147483647))
    # guard bytes: [0, guard) before the cache and [guard + cache_bytes, + guard) after it
    changed = tl.full([GUARD_CHUNK], 0, tl.int64)
    for start in range(0, 2 * guard, GUARD_CHUNK):
        j = (start + tl.arange(0, GUARD_CHUNK)).to(tl.int64)
        inside = j < 2 * guard
        at = tl.where(j < guard, j, j + cache_bytes)
        x = tl.load(a_ptr + at, mask=inside, other=0)
        y = tl.load(b_ptr + at, mask=inside, other=0)
        changed += ((x != y) & inside).to(tl.int64)
    block = tl.reduce(first_block, 0, tl.standard._elementwise_min)
    block = tl.where(block == 2147483647, 0, block).to(tl.int64)
    # the first differing byte of that block, and 4-byte windows of both caches at it (the byte itself, or
    # the fp32 scale word it belongs to)
    offset = tl.load(first_ptr + block)
    word = tl.where(offset >= value_bytes, offset - (offset - value_bytes) % 4, offset)
    at = tl.minimum(guard + block * block_bytes + word + tl.arange(0, 4), guard + cache_bytes - 1)
    tl.store(out_ptr + 0, tl.reduce(total, 0, tl.standard._sum_combine))
    tl.store(out_ptr + 1, tl.reduce(count, 0, tl.standard._sum_combine))
    tl.store(out_ptr + 2, tl.reduce(changed, 0, tl.standard._sum_combine))
    tl.store(out_ptr + 3, block)
    tl.store(out_ptr + 4, offset)
    tl.store(out_ptr + 5 + tl.arange(0, 4), tl.load(a_ptr + at).to(tl.int64))
    tl.store(out_ptr + 9 + tl.arange(0, 4), tl.load(b_ptr + at).to(tl.int64))


def summary(value: torch.Tensor, scale: torch.Tensor, first: torch.Tensor, a_buffer: torch.Tensor,
            b_buffer: torch.Tensor, guard: int, block_bytes: int, value_bytes: int) -> torch.Tensor:
    """int64 [13] of one diff, computed on the device by one program (no chain of small torch ops, each
    a launch and a dispatch): cache_diff, differing_blocks, guard_diff, first block, its first offset,
    then 4 bytes of each whole buffer (guard | cache | guard) at that offset's byte or scale word."""
    out = torch.empty(13, dtype=torch.int64, device=value.device)
    _kernel(_summary, value.device)[(1,)](value, scale, first, a_buffer, b_buffer, out, value.numel(), guard,
                                          a_buffer.numel() - 2 * guard, block_bytes, value_bytes, BLOCKS=BLOCKS,
                                          GUARD_CHUNK=GUARD_CHUNK, num_warps=4)
    return out
