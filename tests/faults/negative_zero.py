"""Planted fault: -0.0 written as +0 (0x00) on e4m3fn, where it encodes as 0x80 (SPEC.md section 4).
Run it on specials inputs. Diagnosed as `signed-zero`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    codes = torch.where(codes == 0x80, torch.zeros_like(codes), codes)  # the fault
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
