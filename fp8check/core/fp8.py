"""Exact FP8 (E4M3) encoding and decoding, both formats (docs/NUMERICS.md). encode() is a saturating
cast (clamp to +-max, round to nearest even), never torch's float -> fp8 cast, whose out-of-range
behaviour changed between torch releases (2.11 turns >= 464 into NaN, 2.13 saturates)."""

from __future__ import annotations

import functools
import math
import struct

import torch

from .spec import FP8Format, ScaleFormat

# Distance reported between a NaN code and a number: larger than any real code distance (<= 252).
NAN_DISTANCE = 255


def exp2_int(exponent: torch.Tensor) -> torch.Tensor:
    """2.0 ** exponent as fp32, built from the bits (exact on every device, unlike pow-based ldexp), for
    integer exponents in [-126, 128]; 128 gives inf."""
    return ((exponent.to(torch.int32) + 127) << 23).view(torch.float32)


def encode(x: torch.Tensor, fmt: FP8Format) -> torch.Tensor:
    """FP8 bytes (uint8, same shape and device) of x, computed on x's fp32 value."""
    x = x.float()
    emin = 1 - fmt.bias  # the smallest normal number is 2^emin
    magnitude = x.abs().clamp(max=fmt.max)  # +-inf saturate like cvt.satfinite
    exponent = torch.frexp(magnitude).exponent.to(torch.int32) - 1  # magnitude in [2^e, 2^(e+1))
    # below the normal range (and at zero, where frexp gives 0) the quantum stays 2^(emin-3)
    exponent = torch.where(magnitude == 0, emin, exponent).clamp(min=emin)
    quantum_exp = exponent - 3  # 3 mantissa bits
    # magnitude / quantum is exact (a power-of-two scaling of an fp32 <= 448, no under/overflow);
    # torch.round rounds half to even. The count lies in [0, 16]; 16 carries into the next binade.
    count = torch.round(magnitude * exp2_int(-quantum_exp))
    code = ((exponent - emin) * 8 + count.to(torch.int32)).clamp(max=0x7F)
    negative = torch.signbit(x)
    if fmt is FP8Format.E4M3FNUZ:
        negative &= code != 0  # fnuz has no -0: 0x80 is its NaN
    code = torch.where(negative, code | 0x80, code)
    code = torch.where(torch.isnan(x), torch.full_like(code, fmt.nan_code), code)
    return code.to(torch.uint8)


@functools.lru_cache(maxsize=None)
def decode_table(fmt: FP8Format) -> tuple[float, ...]:
    """The float value of all 256 codes, from the bit fields (independent of encode())."""
    values = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp_field, mantissa = (code >> 3) & 0xF, code & 0x7
        nan = is_nan_code(code, fmt)
        significand = 8 + mantissa if exp_field else mantissa  # subnormals: no implicit 1, the exponent of 1
        values.append(math.nan if nan else sign * significand * 2.0 ** (max(exp_field, 1) - fmt.bias - 3))
    return tuple(values)


def decode(codes: torch.Tensor, fmt: FP8Format) -> torch.Tensor:
    """fp32 values of FP8 bytes (uint8 tensor, any shape, any device)."""
    return torch.tensor(decode_table(fmt), dtype=torch.float32, device=codes.device)[codes.long()]


def decode_byte(code: int, fmt: FP8Format) -> float:
    return decode_table(fmt)[int(code) & 0xFF]


def is_nan_code(codes: torch.Tensor, fmt: FP8Format) -> torch.Tensor:
    return (codes & 0x7F) == 0x7F if fmt is FP8Format.E4M3FN else codes == 0x80


def code_distance(a: torch.Tensor, b: torch.Tensor, fmt: FP8Format) -> torch.Tensor:
    """Number of representable steps between two FP8 codes (int16, half the memory traffic of int32 on
    big caches); +0 and -0 are 0 apart. A NaN against a number is NAN_DISTANCE; NaN against NaN is 0."""
    ma, mb = (a & 0x7F).to(torch.int16), (b & 0x7F).to(torch.int16)
    same_sign = ((a ^ b) & 0x80) == 0
    distance = torch.where(same_sign, (ma - mb).abs(), ma + mb)
    nan_a, nan_b = is_nan_code(a, fmt), is_nan_code(b, fmt)
    distance = torch.where(nan_a | nan_b, torch.full_like(distance, NAN_DISTANCE), distance)
    return torch.where(nan_a & nan_b, torch.zeros_like(distance), distance)


# ---- scale words (docs/NUMERICS.md) ---------------------------------------------------------------------
UE8M0_BIAS = 127
UE8M0_NAN = 0xFF


def encode_scales(scales: torch.Tensor, scale_fmt: ScaleFormat) -> torch.Tensor:
    """uint8 [..., 4]: the 4-byte scale words of fp32 scales [...]. fp32 and ue8m0: the little-endian fp32
    word; ue8m0x4: four equal UE8M0 bytes (biased exponent of the power-of-two scale; NaN and inf: 0xFF)."""
    scales = scales.to(torch.float32).contiguous()
    if scale_fmt is not ScaleFormat.UE8M0X4:
        return scales.view(torch.uint8).view(*scales.shape, 4)
    mantissa, exponent = torch.frexp(scales)  # a power of two 2^e: mantissa 0.5, exponent e + 1
    biased = (exponent.to(torch.int32) - 1 + UE8M0_BIAS).clamp(0, UE8M0_NAN - 1)
    biased = torch.where(torch.isfinite(scales) & (scales > 0), biased, torch.full_like(biased, UE8M0_NAN))
    return biased.to(torch.uint8).unsqueeze(-1).expand(*scales.shape, 4).contiguous()


def decode_scales(words: torch.Tensor, scale_fmt: ScaleFormat) -> torch.Tensor:
    """fp32 [...] of uint8 scale words [..., 4]. ue8m0x4: 2^(byte - 127) where the four bytes are equal and
    not 0xFF, NaN otherwise (independent of encode_scales: from the bit fields)."""
    words = words.contiguous()
    if scale_fmt is not ScaleFormat.UE8M0X4:
        return words.view(torch.float32).view(words.shape[:-1])
    first = words[..., 0]
    equal = (words == first.unsqueeze(-1)).all(dim=-1) & (first != UE8M0_NAN)
    value = torch.pow(2.0, first.double() - UE8M0_BIAS).to(torch.float32)
    return torch.where(equal, value, torch.full_like(value, math.nan))


def decode_scale_word(word: bytes, scale_fmt: ScaleFormat) -> float:
    """One scale word on the host, as decode_scales reads it (no tensor: renderers call it per example)."""
    if scale_fmt is not ScaleFormat.UE8M0X4:
        return struct.unpack("<f", word)[0]
    return 2.0 ** (word[0] - UE8M0_BIAS) if len(set(word)) == 1 and word[0] != UE8M0_NAN else math.nan
