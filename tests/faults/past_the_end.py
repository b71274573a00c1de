"""Planted fault: after a correct write, a 16-byte vectorized store rounds the end of the cache up and
zeroes 16 bytes past it (into the guard bytes fp8check puts after every cache). Diagnosed as
`stray-write`."""

import torch

from fp8check.core.reference import aiter_writer

TAIL = 16


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
    end = kv_cache.storage_offset() + kv_cache.numel()
    past = torch.as_strided(kv_cache, (TAIL,), (1,), end)  # the fault: beyond the view, inside its storage
    past.zero_()
