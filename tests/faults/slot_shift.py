"""Planted fault: every token is stored one slot too far (slot + 1: values and scales alike); a token whose
shifted slot falls outside the cache writes nothing. The commonest offset bug: an off-by-one in the slot."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    shifted = torch.where(slot_mapping >= 0, slot_mapping + 1, slot_mapping)  # the fault
    shifted = torch.where(shifted < spec.num_slots, shifted, torch.full_like(shifted, -1))
    scatter_rows(spec, kv_cache, shifted, codes, scales)
