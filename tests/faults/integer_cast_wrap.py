"""Planted fault: the value region is passed as uint8, so `(x / s).to(uint8)` is an integer conversion:
truncation toward zero, negatives and values over 255 wrapped mod 256 (numpy astype, the Triton
interpreter; SPEC.md section 5). Diagnosed as `integer-cast`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    _, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    x = k.float().view(k.shape[0], spec.groups_per_token, quant_block_size)
    y = x * (1.0 / scales).unsqueeze(-1)
    codes = (torch.trunc(y).to(torch.int64) & 0xFF).to(torch.uint8)  # the fault: wrap like numpy
    scatter_rows(spec, kv_cache, slot_mapping, codes.view(k.shape), scales)
