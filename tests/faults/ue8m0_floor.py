"""Planted fault: ue8m0 scales rounded down, s = 2 ** floor(log2(s)), where every writer rounds up
(SPEC.md section 3); the values then exceed the format's max and saturate. Diagnosed as `ue8m0-rounding`."""

import torch

from fp8check.core import fp8
from fp8check.core.cache import scatter_rows
from fp8check.core.spec import ScaleFormat
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    _, ceil = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    _, exact = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=ScaleFormat.FP32,
                        quant_block_size=quant_block_size)
    floor = torch.where(exact == ceil, ceil, ceil / 2)  # the fault: round down unless s is a power of two
    x = k.float().view(k.shape[0], -1, quant_block_size) * (1 / floor).unsqueeze(-1)
    codes = fp8.encode(x, spec.fp8).view(k.shape[0], -1)
    scatter_rows(spec, kv_cache, slot_mapping, codes, floor)
