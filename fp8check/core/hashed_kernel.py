"""inputs.hashed_k's K as one Triton kernel (CUDA): the same integer mix in uint32, the same exact products.
Imported only for a GPU run; tests prove it equal to inputs.hashed_k under the interpreter."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 4096


def _hashed_k(out_ptr, total, head_dim, element_key, row_key, BLOCK: tl.constexpr):
    # inputs.mix written out three times; uint32 arithmetic wraps mod 2^32 like the mask. i is int64: a
    # K of more than 2^31 elements (524,288 blocks of 64 x 128) is one launch too
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = i < total
    x = (i.to(tl.uint32) * 2) ^ element_key.to(tl.uint32)
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x27D4EB2D
    h1 = x ^ (x >> 16)
    x = (i.to(tl.uint32) * 2 + 1) ^ element_key.to(tl.uint32)
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x27D4EB2D
    h2 = x ^ (x >> 16)
    u = ((h1 & 0xFFFF) + (h1 >> 16) + (h2 & 0xFFFF) + (h2 >> 16)).to(tl.int32) - 131070
    x = (i // head_dim).to(tl.uint32) ^ row_key.to(tl.uint32)
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x27D4EB2D
    r = x ^ (x >> 16)
    m = ((r >> 3) % 8).to(tl.int32)
    e = (r % 7).to(tl.int32) - 6
    scale = (8 + m).to(tl.float32) * ((e + 127) << 23).to(tl.float32, bitcast=True)
    k = u.to(tl.float32) * 0.000030517578125 * scale  # 2^-15
    # round to bf16 (nearest, ties to even) on the bits: the interpreter's own fp32 -> bf16 cast truncates,
    # and k is always finite
    bits = k.to(tl.uint32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    tl.store(out_ptr + i, rounded.to(tl.int16), mask=inside)


_compiled = triton.jit(_hashed_k)


def launch(num_tokens: int, head_dim: int, keys: tuple[int, int], device, *, interpret: bool = False) -> torch.Tensor:
    out = torch.empty(num_tokens, head_dim, dtype=torch.bfloat16, device=device)
    total, kernel = num_tokens * head_dim, _compiled
    if interpret:
        from triton.runtime.interpreter import InterpretedFunction

        kernel = InterpretedFunction(_hashed_k)
    kernel[(triton.cdiv(total, BLOCK),)](out.view(torch.int16), total, head_dim, *keys, BLOCK=BLOCK)
    return out
