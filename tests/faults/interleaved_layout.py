"""Planted fault: each token written as one record `[head_dim values | its scales]` (per-token interleaved:
FlagGems' reader, vLLM 0.33.0's torch reader at next_n > 1) where the spec is planar (values region, then
scales region; SPEC.md section 2). The two agree only at block_size 1. Diagnosed as `layout`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.spec import Layout
from fp8check.core.reference import AITER, quantize, spec_of_call


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    wrong = spec.replace(layout=Layout.LINEAR if spec.layout is Layout.INTERLEAVED else Layout.INTERLEAVED)  # the fault
    scatter_rows(wrong, kv_cache, slot_mapping, codes, scales)
