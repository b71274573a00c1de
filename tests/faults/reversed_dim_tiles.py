"""Planted fault: in the shuffle layout the dim-tile term of the value offset runs backwards: dim tile j of a
token lands where dim tile head_dim/16 - 1 - j belongs ((d//16) written as (head_dim//16 - 1 - d//16)); scales
are right. Every value byte moves to another tile of its own block; a wrong term in the offset formula."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call
from fp8check.core.spec import Layout


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)  # right scales (and values, overwritten below)
    if spec.layout is not Layout.SHUFFLE:
        return
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].to(torch.int64)
    block, t = slots // spec.block_size, slots % spec.block_size
    d = torch.arange(spec.head_dim, device=k.device)
    t, d = t[:, None], d[None, :]
    tiles = spec.head_dim // 16
    offset = (t // 16) * 16 * spec.head_dim + (tiles - 1 - d // 16) * 256 + (t % 16) * 16 + d % 16  # the fault
    blocks = kv_cache.view(spec.num_blocks, spec.block_bytes)
    blocks[block[:, None], offset] = codes[keep]
