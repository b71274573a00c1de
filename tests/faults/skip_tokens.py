"""Planted fault: every fifth token is never written (a grid that misses tokens). Diagnosed as
`unwritten`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    skipped = torch.arange(k.shape[0], device=k.device) % 5 == 4
    slots = torch.where(skipped, torch.full_like(slot_mapping, -1), slot_mapping)  # the fault
    scatter_rows(spec, kv_cache, slots, codes, scales)
