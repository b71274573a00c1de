"""Planted fault: the value store has no mask, so a lane past the last token (slot -1 from the masked slot
load; Triton's // and % truncate: block 0, t = -1) stores its row of masked input (x = 0: every code 0) at the
shuffle offset of t = -1: the last row of the previous dim tile, token 15's dims 0..head_dim-17 of block 0
(dim tile 0 lands before the cache). Diagnosed as a `stray-write` of a row no token has."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call
from fp8check.core.spec import Layout


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
    if spec.layout is not Layout.SHUFFLE:
        return
    d = torch.arange(16, spec.head_dim, device=k.device)
    offset = (d // 16) * 256 - 16 + d % 16  # the fault: t = -1 in the tile offset, inside block 0 from tile 1 on
    kv_cache.view(spec.num_blocks, spec.block_bytes)[0, offset] = 0
