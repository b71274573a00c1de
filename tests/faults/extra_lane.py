"""Planted fault: `token <= num_tokens` for `token < num_tokens`: one lane past the last token runs, reads a
slot of 0 and a row of zeros past the end of its inputs, and writes that row's quantization (all-zero
values, the floor's scale) over slot 0, a real token's. Diagnosed as a stray write of a row no token has,
with the hint at the token mask, not as an integer cast."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
    # the fault: one lane too many, which runs after the others here, reads slot 0 and a row of zeros
    zero_codes, zero_scales = quantize(torch.zeros_like(k[:1]), profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt,
                                       quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, torch.zeros_like(slot_mapping[:1]), zero_codes, zero_scales)
