"""Planted fault: a copy of fp8check's Triton writer (vLLM's numerics) whose amax is the signed maximum,
`max(x)` where it must be `max(|x|)` (`tl.max(x)` for `tl.max(tl.abs(x))`). A group whose largest magnitude
is negative gets too small a scale, and its values saturate. Diagnosed as `amax`, with the hint at the abs,
not as a divisor."""

import torch
import triton
import triton.language as tl

from fp8check.core.spec import Layout, ScaleFormat
from fp8check.triton_cpu.interpreter import cpu_kernels
from fp8check.core.reference import spec_of_call


@triton.jit
def _kernel(k_ptr, value_ptr, scale_ptr, slot_ptr, num_tokens, num_slots, block_size, block_bytes,
            HEAD_DIM: tl.constexpr, TOKENS: tl.constexpr, DIV: tl.constexpr, UE8M0: tl.constexpr,
            SHUFFLE: tl.constexpr):
    token = tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)
    in_range = token < num_tokens
    slot = tl.load(slot_ptr + token, mask=in_range, other=-1)
    write = (slot >= 0) & (slot < num_slots)
    dim = tl.arange(0, HEAD_DIM)
    x = tl.load(k_ptr + token[:, None].to(tl.int64) * HEAD_DIM + dim[None, :], mask=write[:, None], other=0.0)
    x = x.to(tl.float32)
    amax = tl.reduce(x, 1, tl.standard._elementwise_max)  # the fault: no tl.abs
    scale = tl.maximum(amax, 1e-4) / DIV
    if UE8M0:
        scale = tl.exp2(tl.ceil(tl.log2(scale)))
    y = x / scale[:, None]
    block = slot // block_size
    t = (slot % block_size)[:, None]
    if SHUFFLE:
        offset = (t // 16) * (16 * HEAD_DIM) + (dim[None, :] // 16) * 256 + (t % 16) * 16 + dim[None, :] % 16
    else:
        offset = t * HEAD_DIM + dim[None, :]
    base = block * block_bytes
    tl.store(value_ptr + base[:, None] + offset, y.to(value_ptr.dtype.element_ty), mask=write[:, None])
    tl.store(scale_ptr + (base + block_size * HEAD_DIM) // 4 + slot % block_size, scale, mask=write)


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    values = kv_cache.view(spec.num_blocks, spec.block_bytes)[:, : spec.value_bytes].view(fp8_dtype)
    tokens = 256
    with cpu_kernels():
        _kernel[(triton.cdiv(k.shape[0], tokens),)](
            k, values, kv_cache.view(-1).view(torch.float32), slot_mapping, k.shape[0], spec.num_slots,
            spec.block_size, spec.block_bytes, HEAD_DIM=spec.head_dim, TOKENS=tokens, DIV=spec.fp8.vllm_divisor,
            UE8M0=spec.scale_fmt is ScaleFormat.UE8M0, SHUFFLE=spec.layout is Layout.SHUFFLE)
