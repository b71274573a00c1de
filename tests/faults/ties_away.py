"""Planted fault: FP8 rounding with ties away from zero instead of ties to even (the Triton interpreter's
conversion; SPEC.md section 6). Run it on ties inputs. Diagnosed as `rounding`."""

import torch

from fp8check.core import fp8
from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, FP32_MIN_NORMAL, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    _, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    x = k.float().view(k.shape[0], spec.groups_per_token, quant_block_size)
    x = torch.where(x.abs() < FP32_MIN_NORMAL, torch.copysign(torch.zeros_like(x), x), x)
    y = (x * (1.0 / scales).unsqueeze(-1)).clamp(-spec.fp8.max, spec.fp8.max)
    codes = fp8.encode(y, spec.fp8)
    magnitude = (codes & 0x7F).to(torch.int32)
    below = fp8.decode(magnitude.to(torch.uint8), spec.fp8)
    above = fp8.decode((magnitude + 1).clamp(max=0x7F).to(torch.uint8), spec.fp8)
    # the fault: a tie that went down (to the even code) goes up, away from zero
    tie_down = (2 * y.abs() == below + above) & (y.abs() > below)
    codes = torch.where(tie_down, codes + 1, codes)
    scatter_rows(spec, kv_cache, slot_mapping, codes.view(k.shape), scales)
