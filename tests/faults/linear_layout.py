"""Planted fault: values written row-major (linear) where the spec's layout is shuffle (aiter's
preshuffle, MFMA 16x16 tiles; SPEC.md section 2). Diagnosed as `layout`."""

import torch

from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, quantize, spec_of_call
from fp8check.core.spec import Layout


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    wrong = spec.replace(layout=Layout.LINEAR if spec.layout is Layout.SHUFFLE else Layout.SHUFFLE)  # the fault
    scatter_rows(wrong, kv_cache, slot_mapping, codes, scales)
