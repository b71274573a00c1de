"""STAND-IN for ROCm aiter's paged MQA logits kernel (tests only; never shipped, never registered).

`aiter.ops.triton.pa_mqa_logits.deepgemm_fp8_paged_mqa_logits(q_fp8, kv_cache, weights, out_logits,
context_lens, kv_indices, max_model_len, Preshuffle=False, KVBlockSize=1, ChunkK=256, ...)` fills
out_logits; with Preshuffle it reads the SHUFFLE layout, without it row-major (SPEC.md section 7).
Numerics: fp8check's reference reader, rounded to fp32 (the real kernel accumulates in fp32). Like the
real kernel it insists on KVBlockSize == the cache's block size and an FP8 query.
"""

from __future__ import annotations

from types import ModuleType

import torch

from fp8check.producers import reader_reference as reference
from fp8check.core.spec import CacheSpec, FP8Format, Layout

from . import package

VERSION = "0.0.0+standin"


def deepgemm_fp8_paged_mqa_logits(q_fp8, kv_cache, weights, out_logits, context_lens, kv_indices, max_model_len,
                                  Preshuffle=False, KVBlockSize=1, ChunkK=256, TotalCuCount=None, WavePerEU=2,
                                  VarCtxSchedule=None):
    num_blocks, block_size, _, row_bytes = kv_cache.shape
    assert block_size == KVBlockSize, f"{block_size} != {KVBlockSize}"
    assert ChunkK % KVBlockSize == 0 or KVBlockSize % ChunkK == 0, (ChunkK, KVBlockSize)
    assert q_fp8.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz), q_fp8.dtype
    head_dim = q_fp8.shape[-1]
    spec = CacheSpec(
        num_blocks=num_blocks, block_size=block_size, head_dim=head_dim,
        quant_block_size=head_dim // ((row_bytes - head_dim) // 4), fp8=FP8Format.from_torch_dtype(q_fp8.dtype),
        layout=Layout.SHUFFLE if Preshuffle else Layout.LINEAR,
    )
    logits = reference.paged_logits(spec, q_fp8.view(torch.uint8), kv_cache.reshape(num_blocks, -1), weights,
                                    context_lens, kv_indices, max_model_len)
    out_logits.copy_(logits.float())


def modules(*, nested: bool = False) -> dict[str, ModuleType]:
    """sys.modules entries of a stand-in aiter with the logits kernel (in the newer nested module when asked)."""
    where = "aiter.ops.triton.attention.pa_mqa_logits" if nested else "aiter.ops.triton.pa_mqa_logits"
    kernel = ModuleType(where)
    kernel.deepgemm_fp8_paged_mqa_logits = deepgemm_fp8_paged_mqa_logits
    found = {
        "aiter": package("aiter", __version__=VERSION),
        "aiter.ops": package("aiter.ops"),
        "aiter.ops.triton": package("aiter.ops.triton"),
        where: kernel,
    }
    if nested:
        found["aiter.ops.triton.attention"] = package("aiter.ops.triton.attention")
    return found
