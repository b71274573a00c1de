"""Planted fault: padding tokens (slot -1) are written to slot 0, which a real token owns (SGLang's dummy-slot
convention applied to a slot that is in use); the padding rows overwrite that token. Run it with padded
slots. Diagnosed as `stray-write` (the overwritten token), not as a scale cause."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    real = slot_mapping >= 0
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
    last_pad = torch.nonzero(~real).view(-1)[-1:]  # the fault: the (last) padding row lands in slot 0
    scatter_rows(spec, kv_cache, torch.zeros_like(slot_mapping[last_pad]), codes[last_pad], scales[last_pad])
