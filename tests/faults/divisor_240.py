"""Planted fault: s = amax / 240 (e4m3fnuz's max) on an e4m3fn cache, where the reference divides by 448.
With fp32 scales every scale is 448/240 = 1.8667x the reference's. Diagnosed as `scale-ratio`."""

import dataclasses

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call

WRONG = dataclasses.replace(AITER, divisor_fn=240.0, divisor_fnuz=448.0)  # the fault: the other format's max


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=WRONG, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
