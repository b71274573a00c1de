"""Planted fault: amax / DIV computed with an approximate division that overshoots by one fp32 ulp
(compiled Triton's `/` on NVIDIA; SPEC.md section 3). With ue8m0 scales, a group whose amax / DIV is
exactly a power of two gets ceil(log2(s)) one higher: its scale doubles and its values halve. Run it on
ue8m0-boundary inputs. Diagnosed as `scale-pow2`."""

import torch

from fp8check.core import fp8
from fp8check.core.cache import scatter_rows
from fp8check.core.reference import AITER, FP32_MIN_NORMAL, SCALE_FLOOR, pow2_ceil, spec_of_call
from fp8check.core.spec import ScaleFormat


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    x = k.float().view(k.shape[0], spec.groups_per_token, quant_block_size)
    x = torch.where(x.abs() < FP32_MIN_NORMAL, torch.copysign(torch.zeros_like(x), x), x)
    scale = x.abs().amax(dim=-1).clamp(min=SCALE_FLOOR) / AITER.divisor(spec.fp8)
    scale = torch.nextafter(scale, torch.full_like(scale, float("inf")))  # the fault: one ulp high
    if spec.scale_fmt is ScaleFormat.UE8M0:
        scale = pow2_ceil(scale)
    codes = fp8.encode(x * (1.0 / scale).unsqueeze(-1), spec.fp8)
    scatter_rows(spec, kv_cache, slot_mapping, codes.view(k.shape), scale)
