"""Planted fault: the stored scales of every fourth pair of neighbouring tokens (2i, 2i + 1) are swapped;
the values are right. Diagnosed as `scale-swap`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    stored = scales.clone()
    pairs = torch.arange(0, k.shape[0] - 1, 8)  # tokens 0 and 1, 8 and 9, ...
    stored[pairs], stored[pairs + 1] = scales[pairs + 1], scales[pairs]  # the fault
    scatter_rows(spec, kv_cache, slot_mapping, codes, stored)
