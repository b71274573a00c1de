"""Planted fault: the load of k reads zeros for the last 16 tokens (its mask bound num_tokens - 16, with
other=0.0); their rows are quantized from an all-zero input: every code 0, the scale of amax 0. Diagnosed as
`zero-input`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    loaded = k.clone()
    loaded[-16:] = 0  # the fault: the mask of the load is off for the last 16 tokens
    codes, scales = quantize(loaded, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt,
                             quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
