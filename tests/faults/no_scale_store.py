"""Planted fault: the values are stored, the scale store is dropped (a store masked off or deleted): every
written token's scale word keeps the poison fill. Diagnosed as `unwritten` with the hint at the scale store,
not at the grid."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    written = kv_cache.clone()
    scatter_rows(spec, written, slot_mapping, codes, scales)
    values = slice(0, spec.value_bytes)  # the fault: only the value region is stored
    kv_cache.view(spec.num_blocks, -1)[:, values] = written.view(spec.num_blocks, -1)[:, values]
