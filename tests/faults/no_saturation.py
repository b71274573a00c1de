"""Planted fault: a hand-written non-saturating FP8 conversion whose overflow test is `|y| >= max`, so the
largest finite value becomes NaN instead of +-max (every group's amax element lands exactly on max with
ties inputs, or fp32 scales). Diagnosed as `saturation-nan`."""

import torch

from fp8check.core import fp8
from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, FP32_MIN_NORMAL, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    _, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    x = k.float().view(k.shape[0], spec.groups_per_token, quant_block_size)
    x = torch.where(x.abs() < FP32_MIN_NORMAL, torch.copysign(torch.zeros_like(x), x), x)
    y = x * (1.0 / scales).unsqueeze(-1)
    codes = fp8.encode(y, spec.fp8)
    codes = torch.where(y.abs() >= spec.fp8.max, torch.full_like(codes, spec.fp8.nan_code), codes)  # the fault
    scatter_rows(spec, kv_cache, slot_mapping, codes.view(k.shape), scales)
