"""Planted fault: `token <= num_tokens` for `token < num_tokens`: one lane past the last token runs, reads a
slot of 0 and a row of zeros past the end of its inputs, and writes that row's quantization (all-zero
values, the floor's scale) over slot 0, a real token's. Diagnosed as a stray write of a row no token has,
with the hint at the token mask, not as an integer cast."""

import torch

from fp8check.cache import scatter_rows
from fp8check.writers.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    past_the_end = torch.cat([k, torch.zeros_like(k[:1])])  # the fault: one lane too many
    slots = torch.cat([slot_mapping, torch.zeros_like(slot_mapping[:1])])
    codes, scales = quantize(past_the_end, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt,
                             quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, slots, codes, scales)
