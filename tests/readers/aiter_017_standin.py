"""STAND-IN for amd-aiter 0.1.7's Triton `deepgemm_fp8_paged_mqa_logits` WITH ITS TWO BUGS (tests only; never
shipped, never registered). Written for the tests from the bug's description (aiter PR #1424, fixed
upstream later), not copied: its MTP causal mask lets query row 0 see one future token (`<= ctx - n`
instead of `<= ctx - next_n + n`, so at next_n 2 row 0 scores position ctx - 1), and its unmasked logits
store writes one logit past the end of row 0 (at column max_model_len, through the row stride, the way a
kernel addresses the buffer). Otherwise the numerics of fp8check's reference reader, rounded to fp32, like
tests/standins/aiter_reader_standin.py.
"""

from __future__ import annotations

from types import ModuleType

import torch

from fp8check.producers import reader_reference as reference
from fp8check.core.spec import CacheSpec, FP8Format, Layout

VERSION = "0.1.7+standin"


def deepgemm_fp8_paged_mqa_logits(q_fp8, kv_cache, weights, out_logits, context_lens, kv_indices, max_model_len,
                                  Preshuffle=False, KVBlockSize=1, ChunkK=256, TotalCuCount=None, WavePerEU=2,
                                  VarCtxSchedule=None):
    num_blocks, block_size, _, row_bytes = kv_cache.shape
    assert block_size == KVBlockSize, f"{block_size} != {KVBlockSize}"
    batch, next_n, _, head_dim = q_fp8.shape
    spec = CacheSpec(num_blocks=num_blocks, block_size=block_size, head_dim=head_dim,
                     quant_block_size=head_dim // ((row_bytes - head_dim) // 4),
                     fp8=FP8Format.from_torch_dtype(q_fp8.dtype), layout=Layout.SHUFFLE if Preshuffle else Layout.LINEAR)
    codes, flat = q_fp8.view(torch.uint8), kv_cache.reshape(num_blocks, -1)
    logits = reference.paged_logits(spec, codes, flat, weights, context_lens, kv_indices, max_model_len)
    # bug 1: row 0 of each sequence is scored like a single query row: it sees every one of the ctx tokens
    rows_zero = torch.arange(batch, device=weights.device) * next_n
    row_zero = reference.paged_logits(spec, codes[:, :1].contiguous(), flat, weights[rows_zero], context_lens,
                                      kv_indices, max_model_len)
    for b, ctx in enumerate(context_lens.tolist()):
        future = ctx - next_n + 1  # the first position row 0 may not see
        if next_n > 1:
            logits[b * next_n, future] = row_zero[b, future]
    out_logits.copy_(logits.float())
    # bug 2: the last chunk's store is not masked at the row's end: one logit lands past row 0
    past = out_logits.storage_offset() + max_model_len
    torch.as_strided(out_logits, (1,), (1,), past).fill_(float(logits[0, 0]))


def paged_mqa_logits(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len, *, out):
    """The stand-in called as vLLM calls aiter's kernel, as a reader file: a keyword-only `out` says it fills
    a caller-made buffer."""
    block_size = kv_cache.shape[1]
    deepgemm_fp8_paged_mqa_logits(q_fp8, kv_cache, weights, out, context_lens, block_tables, max_model_len,
                                  Preshuffle=block_size > 1, KVBlockSize=block_size)


def modules() -> dict[str, ModuleType]:
    """sys.modules entries of a stand-in aiter 0.1.7 with the buggy logits kernel."""
    from standins import package

    kernel = ModuleType("aiter.ops.triton.pa_mqa_logits")
    kernel.deepgemm_fp8_paged_mqa_logits = deepgemm_fp8_paged_mqa_logits
    return {"aiter": package("aiter", __version__=VERSION), "aiter.ops": package("aiter.ops"),
            "aiter.ops.triton": package("aiter.ops.triton"), "aiter.ops.triton.pa_mqa_logits": kernel}
