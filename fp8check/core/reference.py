"""Vectorized PyTorch emulations of the real writers' numerics (docs/NUMERICS.md), the same code on CPU and
CUDA: `quantize` by a `Profile`, and `make_writer`'s writers of the de-facto signature around it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import fp8
from .cache import scatter_rows
from .spec import SCALE_FLOOR, CacheSpec, FP8Format, Layout, ScaleFormat

FP32_MIN_NORMAL = 2.0**-126
CHUNK_TOKENS = 8192  # tokens quantized at once


@dataclass(frozen=True)
class Profile:
    name: str
    divisor_fn: float  # DIV on e4m3fn
    divisor_fnuz: float  # DIV on e4m3fnuz
    reciprocal: bool  # value = x * fl(1/s) instead of x / s
    flush_denormals: bool  # fp32 denormal inputs become (signed) zero
    description: str
    # aiter's IEEE-mode v_max3_f32 / fmaxf amax drops a NaN input, and its clamp v_med3_f32(NaN, -max,
    # max) gives -max: a NaN (or inf * 0) value is written as -max (docs/NUMERICS.md).
    ieee_amax_and_clamp: bool = False

    def divisor(self, fmt: FP8Format) -> float:
        return self.divisor_fn if fmt is FP8Format.E4M3FN else self.divisor_fnuz


AITER = Profile("aiter", FP8Format.E4M3FN.max, FP8Format.E4M3FNUZ.max, reciprocal=True, flush_denormals=True,
                description="aiter C++ op + shuffle_weight (PyTorch emulation): DIV = format max, x * (1/s), clamp,"
                            " FTZ", ieee_amax_and_clamp=True)
VLLM = Profile("vllm", FP8Format.E4M3FN.vllm_divisor, FP8Format.E4M3FNUZ.vllm_divisor, reciprocal=False,
               flush_denormals=False, description="vLLM writer numerics (PyTorch emulation): DIV 448 / 224, x / s")


def pow2_ceil(s: torch.Tensor) -> torch.Tensor:
    """2 ** ceil(log2(s)) for positive fp32 s, exactly (from the bits, no log2 rounding)."""
    mantissa, exponent = torch.frexp(s)  # s = mantissa * 2^exponent, mantissa in [0.5, 1)
    exponent = torch.where(mantissa == 0.5, exponent - 1, exponent)
    # frexp(inf) gives exponent 0 (scale 1); the writers' exp2(ceil(log2(s))) keeps an inf or NaN s
    return torch.where(torch.isfinite(s), fp8.exp2_int(exponent.clamp(min=-126, max=128)), s)


def quantize(k: torch.Tensor, *, profile: Profile, fmt: FP8Format, scale_fmt: ScaleFormat, quant_block_size: int,
             amax_floor: float = SCALE_FLOOR) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes uint8 [T, head_dim], scales fp32 [T, head_dim/qbs]) of bf16 rows k [T, head_dim]. amax_floor:
    s = max(amax, amax_floor) / DIV (1e-4 in every writer but LMDeploy's, 1e-6)."""
    num_tokens, head_dim = k.shape
    x = k.to(torch.float32).view(num_tokens, head_dim // quant_block_size, quant_block_size)
    if profile.flush_denormals:
        x = torch.where(x.abs() < FP32_MIN_NORMAL, torch.copysign(torch.zeros_like(x), x), x)
    magnitude = x.abs()
    if profile.ieee_amax_and_clamp:
        magnitude = torch.where(torch.isnan(magnitude), torch.zeros_like(magnitude), magnitude)
    amax = magnitude.amax(dim=-1)
    # Divide by tensors only: on CUDA, PyTorch turns `tensor / python_scalar` into a multiplication by
    # the scalar's reciprocal (measured on an H200: 57% of quotients off by an ulp), which is not the
    # IEEE division every writer specifies. Tensor / tensor is a true division on every device.
    divisor = torch.tensor(profile.divisor(fmt), dtype=torch.float32, device=x.device)
    scale = amax.clamp(min=amax_floor) / divisor
    if scale_fmt.power_of_two:
        scale = pow2_ceil(scale)
    y = x * (torch.ones_like(scale) / scale).unsqueeze(-1) if profile.reciprocal else x / scale.unsqueeze(-1)
    if profile.ieee_amax_and_clamp:
        y = torch.where(torch.isnan(y), torch.full_like(y, -fmt.max), y)
    return fp8.encode(y, fmt).view(num_tokens, head_dim), scale


def spec_of_call(k: torch.Tensor, kv_cache: torch.Tensor, quant_block_size: int, scale_fmt: str | None,
                 fp8_dtype: torch.dtype, layout: str | None) -> CacheSpec:
    return CacheSpec(kv_cache.shape[0], kv_cache.shape[1], k.shape[1], quant_block_size,
                     FP8Format.from_torch_dtype(fp8_dtype), ScaleFormat.from_writer_arg(scale_fmt),
                     Layout(layout) if layout else None)


def make_writer(profile: Profile):
    def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
        spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
        # token by token the same bytes; in chunks, the fp32 and int64 intermediates stay bounded
        # (whole-K intermediates would be ~10x the caches and K; bench/cases.py measures the peak)
        for start in range(0, k.shape[0], CHUNK_TOKENS):
            chunk = slice(start, start + CHUNK_TOKENS)
            codes, scales = quantize(k[chunk], profile=profile, fmt=spec.fp8, scale_fmt=spec.scale_fmt,
                                     quant_block_size=quant_block_size)
            scatter_rows(spec, kv_cache, slot_mapping[chunk], codes, scales)

    writer.__name__ = f"reference_{profile.name}_writer"
    writer.__doc__ = profile.description
    return writer


aiter_writer = make_writer(AITER)
vllm_writer = make_writer(VLLM)
