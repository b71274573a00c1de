"""Planted fault: the right quotients x / s (DIV of the spec's format) encoded in the other FP8 format,
as when the cache is viewed as the wrong torch dtype. Diagnosed as `fp8-format`."""

import torch

from fp8check.core import fp8
from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call
from fp8check.core.spec import FP8Format


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    _, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    x = k.float().view(k.shape[0], spec.groups_per_token, quant_block_size)
    x = torch.where(x.abs() < 2.0**-126, torch.copysign(torch.zeros_like(x), x), x)  # aiter's FTZ
    other = FP8Format.E4M3FNUZ if spec.fp8 is FP8Format.E4M3FN else FP8Format.E4M3FN  # the fault
    codes = fp8.encode(x * (1.0 / scales).unsqueeze(-1), other)
    scatter_rows(spec, kv_cache, slot_mapping, codes.view(k.shape), scales)
