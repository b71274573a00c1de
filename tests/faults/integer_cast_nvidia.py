"""Planted fault: the same uint8 view as integer_cast_wrap, converted the way compiled Triton on NVIDIA
does it (SPEC.md section 5): truncation toward zero, negatives become 0, values over 255 wrap mod 256.
Diagnosed as `integer-cast`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    _, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    x = k.float().view(k.shape[0], spec.groups_per_token, quant_block_size)
    whole = torch.trunc(x * (1.0 / scales).unsqueeze(-1)).to(torch.int64)
    codes = torch.where(whole < 0, torch.zeros_like(whole), whole & 0xFF).to(torch.uint8)  # the fault
    scatter_rows(spec, kv_cache, slot_mapping, codes.view(k.shape), scales)
