"""Stands for your kernel repository's writer: a vLLM-style Triton indexer K quant-and-cache writer,
one program per token (written for this example; the semantics are vLLM's ROCm writer's)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _quant_and_cache_kernel(k_ptr, value_ptr, scale_ptr, slot_ptr, block_size, block_bytes,
                            HEAD_DIM: tl.constexpr, DIV: tl.constexpr, UE8M0: tl.constexpr, SHUFFLE: tl.constexpr):
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token)
    if slot >= 0:  # padding tokens (slot -1) write nothing
        dim = tl.arange(0, HEAD_DIM)
        x = tl.load(k_ptr + token * HEAD_DIM + dim).to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-4) / DIV
        if UE8M0:
            scale = tl.exp2(tl.ceil(tl.log2(scale)))
        block = slot // block_size
        t = slot % block_size
        if SHUFFLE:
            offset = (t // 16) * (16 * HEAD_DIM) + (dim // 16) * 256 + (t % 16) * 16 + dim % 16
        else:
            offset = t * HEAD_DIM + dim
        tl.store(value_ptr + block * block_bytes + offset, (x / scale).to(value_ptr.dtype.element_ty))
        tl.store(scale_ptr + (block * block_bytes + block_size * HEAD_DIM) // 4 + t, scale)


def indexer_k_quant_and_cache(k, kv_cache, slot_mapping, quant_block_size, scale_fmt,
                              fp8_dtype=torch.float8_e4m3fn):
    num_blocks, block_size, row_bytes = kv_cache.shape
    head_dim = k.shape[1]
    block_bytes = block_size * row_bytes
    values = kv_cache.view(num_blocks, block_bytes)[:, : block_size * head_dim]
    values = values.view(fp8_dtype)  # the fix: without it the kernel's cast is float -> uint8
    scales = kv_cache.view(-1).view(torch.float32)
    divisor = 448.0 if fp8_dtype == torch.float8_e4m3fn else 224.0
    _quant_and_cache_kernel[(k.shape[0],)](
        k, values, scales, slot_mapping, block_size, block_bytes,
        HEAD_DIM=head_dim, DIV=divisor, UE8M0=scale_fmt == "ue8m0", SHUFFLE=block_size > 1,
    )
