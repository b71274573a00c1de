"""Planted fault: padding tokens (slot -1) are not skipped; slot -1 indexes from the end of the cache, as
negative indices do in PyTorch, so they land in the last slot. Run it with padded slots and a last block
no token maps to. Diagnosed as `stray-write`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    slots = torch.remainder(slot_mapping, spec.num_slots)  # the fault: -1 -> the last slot
    scatter_rows(spec, kv_cache, slots, codes, scales)
