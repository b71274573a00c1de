"""Planted fault: the scale floor is 1e-6 (LMDeploy 0.18.0's `fill_kv_cache_blocked_fp8`), not 1e-4:
s = max(amax, 1e-6) / DIV. Differs only on groups with amax below 1e-4 (`--inputs tiny`). Diagnosed as
`amax-floor`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt,
                             quant_block_size=quant_block_size, amax_floor=1e-6)  # the fault
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
