"""Planted fault: every token's scale is stored one slot too far (slot + 1); the values are right and at their
own slot. Slot 0's scale is never written, the last slot's scale lands past it (nowhere, here). Diagnosed as a
`shift` of the scale words, not as swapped scales."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    moved = kv_cache.clone()
    shifted = torch.where(slot_mapping >= 0, slot_mapping + 1, slot_mapping)  # the fault, for the scales only
    shifted = torch.where(shifted < spec.num_slots, shifted, torch.full_like(shifted, -1))
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
    scatter_rows(spec, moved, shifted, codes, scales)
    scale_region = slice(spec.value_bytes, spec.value_bytes + spec.scale_bytes)
    blocks, moved_blocks = kv_cache.view(spec.num_blocks, -1), moved.view(spec.num_blocks, -1)
    blocks[:, scale_region] = moved_blocks[:, scale_region]
