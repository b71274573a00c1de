"""The one-pass block diff on CUDA: one Triton program per cache block reads both caches once.

Each program walks its block in CHUNK-byte steps and keeps three running results: differing bytes of
the value region, of the scale region, and the offset of the first differing byte (block_bytes when
none). Everything stays on the device; diff.py brings back the totals in one transfer. Imported only
when the caches live on a GPU (Triton is not needed for a CPU diff).
"""

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
    # can call only when TRITON_INTERPRET was set before Triton's import; see writers/triton.py)
    tl.store(value_out + block, tl.reduce(value, 0, tl.standard._sum_combine).to(tl.int64))
    tl.store(scale_out + block, tl.reduce(scale, 0, tl.standard._sum_combine).to(tl.int64))
    first_offset = tl.reduce(first, 0, tl.standard._elementwise_min)
    tl.store(first_out + block, tl.minimum(first_offset, block_bytes).to(tl.int64))


def _kernel(device: torch.device):
    """Compiled on a GPU; under Triton's interpreter on the CPU (tests prove the counts there)."""
    if device.type != "cpu":
        return _block_diff
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(_block_diff.fn)


def block_diff(a: torch.Tensor, b: torch.Tensor, value_bytes: int, scale_bytes: int):
    """(value_diff, scale_diff, first_offset) int64 [num_blocks] of two uint8 [num_blocks, block_bytes]
    caches; first_offset is block_bytes where a block has no differing byte."""
    num_blocks, block_bytes = a.shape
    value = torch.empty(num_blocks, dtype=torch.int64, device=a.device)
    scale = torch.empty_like(value)
    first = torch.empty_like(value)
    if num_blocks:
        _kernel(a.device)[(num_blocks,)](a, b, value, scale, first, block_bytes, value_bytes, value_bytes + scale_bytes,
                                   CHUNK=CHUNK, num_warps=4)
    return value, scale, first
