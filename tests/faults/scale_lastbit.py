"""Planted fault: every third token's fp32 scale has its last mantissa bit flipped (a fused or
reassociated amax / DIV), and its values are quantized with that scale. Run it with fp32 scales.
Diagnosed as `scale-ulp`."""

import torch

from fp8check.core import fp8
from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, FP32_MIN_NORMAL, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    _, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    flip = (torch.arange(k.shape[0], device=k.device) % 3 == 0).view(-1, 1)
    bits = scales.contiguous().view(torch.int32)
    scales = torch.where(flip, (bits ^ 1).view(torch.float32), scales)  # the fault
    x = k.float().view(k.shape[0], spec.groups_per_token, quant_block_size)
    x = torch.where(x.abs() < FP32_MIN_NORMAL, torch.copysign(torch.zeros_like(x), x), x)
    codes = fp8.encode(x * (1.0 / scales).unsqueeze(-1), spec.fp8)
    scatter_rows(spec, kv_cache, slot_mapping, codes.view(k.shape), scales)
