# SPDX-License-Identifier: Apache-2.0
"""A vLLM-style ROCm ops module, written for fp8check's tests (not vLLM's code).

It has the shape of vLLM's `vllm/v1/attention/ops/rocm_aiter_mla_sparse.py` as SPEC.md section 6b
describes it: an import block that needs vLLM itself, module-level platform code, one Triton program
per token in the K-cache writer, and two readers. fp8check's `vllm-file:` loader must run the writer
and the readers from this file on a machine without vLLM, without executing the vLLM imports.
The writer wrapper is the *fixed* one (`.view(FP8_DTYPE)` on the value slice); the tests derive the
pre-fix wrapper by deleting that view.
"""

import functools

import torch
import torch.nn.functional as F

import vllm.envs as envs
from vllm.compilation.breakable_cudagraph import breakable_cudagraph
from vllm.config import get_current_vllm_config
from vllm.forward_context import get_forward_context
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.triton_utils import tl, triton
from vllm.v1.worker.workspace import current_workspace_manager

if current_platform.is_rocm():
    from vllm.platforms.rocm import _ON_GFX942, _ON_GFX950

logger = init_logger(__name__)

FP8_DTYPE = current_platform.fp8_dtype()
_MFMA_TILE = 16  # SHUFFLE layout: 16 x 16 byte tiles (SPEC.md section 2)
_READER_ROWS_PER_SPLIT = 4


@triton.jit
def _quant_k_into_paged_cache(
    k_ptr,
    value_ptr,
    scale_ptr,
    slot_ptr,
    value_block_stride,
    scale_block_stride,
    block_size,
    HEAD_DIM: tl.constexpr,
    TILE: tl.constexpr,
    FMT_MAX: tl.constexpr,
    POW2_SCALE: tl.constexpr,
    SHUFFLED: tl.constexpr,
):
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token)
    if slot < 0:  # padding token: writes nothing
        return
    blk = slot // block_size
    pos = slot % block_size
    dims = tl.arange(0, HEAD_DIM)
    x = tl.load(k_ptr + token * HEAD_DIM + dims).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)
    s = tl.maximum(amax, 1e-4) / FMT_MAX
    if POW2_SCALE:
        s = tl.exp2(tl.ceil(tl.log2(s)))
    q = (x / s).to(value_ptr.dtype.element_ty)
    if SHUFFLED:
        where = (pos // TILE) * (TILE * HEAD_DIM) + (dims // TILE) * (TILE * TILE) + (pos % TILE) * TILE + dims % TILE
    else:
        where = pos * HEAD_DIM + dims
    tl.store(value_ptr + blk * value_block_stride + where, q)
    tl.store(scale_ptr + blk * scale_block_stride + pos, s)


def indexer_k_quant_and_cache_triton(
    k: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    quant_block_size,
    scale_fmt,
):
    num_blocks, block_size = kv_cache.shape[0], kv_cache.shape[1]
    head_dim = k.shape[-1]
    per_block = kv_cache.view(num_blocks, -1)
    value_region = per_block[:, : block_size * head_dim].view(FP8_DTYPE)
    scale_region = per_block[:, block_size * head_dim :].view(torch.float32)
    fmt_max = 224.0 if FP8_DTYPE == torch.float8_e4m3fnuz else 448.0
    _quant_k_into_paged_cache[(slot_mapping.shape[0],)](
        k,
        value_region,
        scale_region,
        slot_mapping,
        value_region.stride(0),
        scale_region.stride(0),
        block_size,
        HEAD_DIM=head_dim,
        TILE=_MFMA_TILE,
        FMT_MAX=fmt_max,
        POW2_SCALE=scale_fmt == "ue8m0",
        SHUFFLED=block_size > 1,
    )


def _dequant_block_flat(kv_cache: torch.Tensor, head_dim: int) -> torch.Tensor:
    """[num_blocks * block_size, head_dim] fp32 keys, reading values row-major (block-flat)."""
    num_blocks, block_size = kv_cache.shape[0], kv_cache.shape[1]
    per_block = kv_cache.view(num_blocks, -1)
    values = per_block[:, : block_size * head_dim].contiguous().view(FP8_DTYPE).to(torch.float32)
    scales = per_block[:, block_size * head_dim :].contiguous().view(torch.float32)
    keys = values.view(num_blocks, block_size, head_dim) * scales.view(num_blocks, block_size, 1)
    return keys.view(num_blocks * block_size, head_dim)


def fp8_paged_mqa_logits_torch(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    from vllm.utils.math_utils import cdiv

    batch, next_n, heads, head_dim = q_fp8.shape
    block_size = kv_cache.shape[1]
    keys = _dequant_block_flat(kv_cache, head_dim)
    logits = torch.full((batch * next_n, max_model_len), float("-inf"), dtype=torch.float32, device=q_fp8.device)
    q = q_fp8.to(torch.float32)
    for b in range(batch):
        ctx = int(context_lens[b])
        blocks = block_tables[b, : cdiv(ctx, block_size)].long()
        rows = (blocks[:, None] * block_size + torch.arange(block_size, device=blocks.device)).reshape(-1)[:ctx]
        k_rows = keys[rows]
        for n in range(next_n):
            visible = ctx - next_n + n + 1
            scores = F.relu(q[b, n] @ k_rows[:visible].T)  # [heads, visible]
            logits[b * next_n + n, :visible] = (weights[b * next_n + n][:, None] * scores).sum(0)
    return logits


@triton.jit
def _row_logits_kernel(q_ptr, k_ptr, w_ptr, out_ptr, visible, max_len, HEADS: tl.constexpr, HEAD_DIM: tl.constexpr):
    row = tl.program_id(0)
    t = tl.program_id(1)
    if t >= tl.load(visible + row):
        return
    h = tl.arange(0, HEADS)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + row * HEADS * HEAD_DIM + h[:, None] * HEAD_DIM + d[None, :])
    key = tl.load(k_ptr + (row * max_len + t) * HEAD_DIM + d)
    w = tl.load(w_ptr + row * HEADS + h)
    s = tl.sum(q * key[None, :], axis=1)
    tl.store(out_ptr + row * max_len + t, tl.sum(w * tl.maximum(s, 0.0), axis=0))


def rocm_fp8_paged_mqa_logits_triton(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    batch, next_n, heads, head_dim = q_fp8.shape
    assert current_platform.fp8_dtype() == FP8_DTYPE
    rows = batch * next_n
    (logits,) = current_workspace_manager().get_simultaneous(((rows, max_model_len), torch.float32))
    logits.fill_(float("-inf"))
    keys = _dequant_block_flat(kv_cache, head_dim)
    block_size = kv_cache.shape[1]
    gathered = torch.zeros(rows, max_model_len, head_dim, dtype=torch.float32, device=q_fp8.device)
    visible = torch.zeros(rows, dtype=torch.int32, device=q_fp8.device)
    for b in range(batch):
        ctx = int(context_lens[b])
        slots = (block_tables[b].long()[:, None] * block_size + torch.arange(block_size, device=q_fp8.device))
        for n in range(next_n):
            visible[b * next_n + n] = ctx - next_n + n + 1
            gathered[b * next_n + n, :ctx] = keys[slots.reshape(-1)[:ctx]]
    splits = max(1, min(_decode_cu_count() // _READER_ROWS_PER_SPLIT, max_model_len))
    assert splits >= 1
    q = q_fp8.to(torch.float32).reshape(rows, heads, head_dim).contiguous()
    _row_logits_kernel[(rows, max_model_len)](q, gathered, weights.contiguous(), logits, visible, max_model_len,
                                              HEADS=heads, HEAD_DIM=head_dim)
    return logits


@functools.lru_cache
def _decode_cu_count() -> int:
    try:
        return torch.cuda.get_device_properties(0).multi_processor_count
    except Exception:
        return 256


def unrelated_module_code_needing_vllm():
    return get_forward_context(), envs.VLLM_ROCM_USE_AITER, get_current_vllm_config(), breakable_cudagraph
