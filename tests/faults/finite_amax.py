"""Planted fault: amax over the finite elements only (aiter's IEEE max drops NaN; SPEC.md section 9) and
non-finite elements written as +-max, where the reference propagates them. Differs only on quant groups whose
input holds inf or NaN (`--inputs specials --specials-inf-nan`). Diagnosed as `non-finite-input`."""

import torch

from fp8check.core import fp8
from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    x = k.float()
    finite = torch.isfinite(x)
    clean = torch.where(finite, x, torch.zeros_like(x)).to(torch.bfloat16)  # the fault: non-finite left out of amax
    codes, scales = quantize(clean, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    top = fp8.encode(torch.tensor([spec.fp8.max, -spec.fp8.max]), spec.fp8)
    codes = torch.where(finite, codes, torch.where(torch.signbit(x), top[1], top[0]))
    scatter_rows(spec, kv_cache, slot_mapping, codes, scales)
