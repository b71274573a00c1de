"""fp8.encode / decode / code_distance: exact bytes for both E4M3 formats (SPEC.md section 4).

Every expectation here is derived without fp8.py: hand-worked bytes (derivation in the comment), a
brute-force nearest-value oracle built from the bit-field formula, and torch's own fp8 dtypes as a
second, independent decoder.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fp8check.core import fp8
from fp8check.core.spec import FP8Format

FN, FNUZ = FP8Format.E4M3FN, FP8Format.E4M3FNUZ
BIAS = {FN: 7, FNUZ: 8}
MAX = {FN: 448.0, FNUZ: 240.0}


def bitfield_value(code: int, fmt: FP8Format) -> float:
    """The value of one code, straight from the E4M3 bit fields (SPEC.md section 4 table)."""
    if fmt is FN and code & 0x7F == 0x7F:
        return math.nan
    if fmt is FNUZ and code == 0x80:
        return math.nan
    sign = -1.0 if code >> 7 else 1.0
    exp_field, mantissa = (code >> 3) & 0xF, code & 0x7
    if exp_field == 0:  # subnormal: 0.m * 2^(1 - bias)
        return sign * math.ldexp(mantissa / 8, 1 - BIAS[fmt])
    return sign * math.ldexp(1 + mantissa / 8, exp_field - BIAS[fmt])


def oracle_encode(x: torch.Tensor, fmt: FP8Format) -> torch.Tensor:
    """Brute force: clamp to +-max, take the nearest of the non-negative finite codes (ties to the
    even mantissa), then apply the sign (fnuz has no -0). Non-NaN inputs only."""
    x = x.to(torch.float64).reshape(-1)
    codes = torch.tensor([c for c in range(128) if not math.isnan(bitfield_value(c, fmt))])
    values = torch.tensor([bitfield_value(int(c), fmt) for c in codes], dtype=torch.float64)
    magnitude = x.abs().clamp(max=MAX[fmt])
    # fp32 inputs against 4-bit-mantissa values: near any tie both sides are exact in float64
    distance = (magnitude.view(-1, 1) - values.view(1, -1)).abs()
    nearest = distance == distance.min(dim=1, keepdim=True).values
    even = (codes % 2 == 0).view(1, -1)
    # one nearest code, or two adjacent ones of which exactly one has an even mantissa
    pick = torch.where(nearest.sum(dim=1, keepdim=True) > 1, nearest & even, nearest)
    assert bool((pick.sum(dim=1) == 1).all())
    code = codes[pick.float().argmax(dim=1)]
    negative = torch.signbit(x)
    if fmt is FNUZ:
        negative &= code != 0
    return torch.where(negative, code | 0x80, code).to(torch.uint8)


def all_bf16_patterns(finite_only: bool = True) -> torch.Tensor:
    bits = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16)
    x = bits.view(torch.bfloat16).float()
    return x[torch.isfinite(x)] if finite_only else x


def encode_one(value: float, fmt: FP8Format) -> int:
    return int(fp8.encode(torch.tensor([value], dtype=torch.float32), fmt)[0])


# (value, e4m3fn byte, e4m3fnuz byte). Normal code = sign<<7 | (e + bias)<<3 | m for 2^e * (1 + m/8).
HAND_PICKED = [
    (1.0, 0x38, 0x40),  # e=0 -> field 7 (fn) / 8 (fnuz), m=0
    (1.0625, 0x38, 0x40),  # 1 + 1/16: midway between m=0 and m=1 -> even m=0
    (1.1875, 0x3A, 0x42),  # 1 + 3/16: midway between m=1 and m=2 -> even m=2 (1.25)
    (-1.1875, 0xBA, 0xC2),  # same with the sign bit
    (0.1, 0x1D, 0x25),  # 1.6 * 2^-4: quantum 2^-7, 0.1 / 2^-7 = 12.8 -> 13 = 8 + 5 -> m=5
    (15.0, 0x57, 0x5F),  # 2^3 * (1 + 7/8): field 10 (fn) / 11 (fnuz), m=7
    (15.5, 0x58, 0x60),  # midway 15 (m=7, odd) and 16 (m=0): carry into the exponent, 2^4
    (15.4, 0x57, 0x5F),  # below the midway point: stays 15
    (2.0**-9, 0x01, 0x02),  # fn: smallest subnormal 2^-6 * 1/8; fnuz: 2^-7 * 2/8
    (2.0**-10, 0x00, 0x01),  # fn: half the smallest subnormal ties to 0; fnuz: its smallest subnormal
    (2.0**-11, 0x00, 0x00),  # fnuz: half its smallest subnormal ties to 0
    (3 * 2.0**-10, 0x02, 0x03),  # fn: 1.5 quanta of 2^-9 -> tie between m=1 and m=2 -> even 2
    (1.5 * 2.0**-10, 0x01, 0x02),  # fn: 0.75 quantum -> 1; fnuz: 1.5 quanta of 2^-10 -> even 2
    (7 * 2.0**-9, 0x07, 0x0E),  # fn: largest subnormal; fnuz: 2^-7 * (1 + 6/8) -> field 1, m=6
    (2.0**-6, 0x08, 0x10),  # fn: smallest normal (field 1); fnuz: field 2
    (240.0, 0x77, 0x7F),  # 2^7 * (1 + 7/8); fnuz max finite is 0x7F
    (-240.0, 0xF7, 0xFF),
    (241.0, 0x77, 0x7F),  # fn: quantum 16, 241/16 = 15.06 -> 15 -> 240; fnuz: clamp to 240
    (250.0, 0x78, 0x7F),  # fn: 250/16 = 15.6 -> 16 -> 256 = 2^8 (field 15, m=0); fnuz: clamp
    (416.0, 0x7D, 0x7F),  # fn: 416/32 = 13 -> m=5
    (432.0, 0x7E, 0x7F),  # fn: 13.5 quanta -> even 14 -> 448
    (448.0, 0x7E, 0x7F),  # fn max finite 2^8 * (1 + 6/8)
    (-448.0, 0xFE, 0xFF),
    (464.0, 0x7E, 0x7F),  # above max: saturates (torch 2.11 made this NaN: clamp first)
    (500.0, 0x7E, 0x7F),
    (1e9, 0x7E, 0x7F),
    (-1e9, 0xFE, 0xFF),
    (math.inf, 0x7E, 0x7F),  # saturating cvt: inf -> max
    (-math.inf, 0xFE, 0xFF),
    (math.nan, 0x7F, 0x80),
    (0.0, 0x00, 0x00),
    (-0.0, 0x80, 0x00),  # fnuz has no -0 (0x80 is its NaN)
    (-(2.0**-12), 0x80, 0x00),  # tiny negatives round to zero: -0 on fn, +0 on fnuz
    (-(2.0**-11), 0x80, 0x00),  # fnuz: exactly half its smallest subnormal, ties to 0
    (2.0**-130, 0x00, 0x00),  # an fp32 denormal
]


@pytest.mark.parametrize("value, fn_byte, fnuz_byte", HAND_PICKED)
def test_encode_hand_picked_bytes(value, fn_byte, fnuz_byte):
    assert encode_one(value, FN) == fn_byte
    assert encode_one(value, FNUZ) == fnuz_byte


@pytest.mark.parametrize("fmt", [FN, FNUZ])
def test_oracle_agrees_with_the_hand_picked_bytes(fmt):
    # The brute-force oracle below is only a witness if it reproduces the hand-derived bytes itself.
    finite = [row for row in HAND_PICKED if not math.isnan(row[0])]
    x = torch.tensor([row[0] for row in finite], dtype=torch.float32)
    expected = [row[1] if fmt is FN else row[2] for row in finite]
    assert oracle_encode(x, fmt).tolist() == expected


def test_encode_keeps_shape_and_returns_uint8():
    x = torch.zeros(3, 5, 7, dtype=torch.bfloat16)
    codes = fp8.encode(x, FN)
    assert codes.dtype == torch.uint8 and codes.shape == (3, 5, 7)


@pytest.mark.parametrize("fmt", [FN, FNUZ])
def test_encode_every_finite_bf16_pattern_matches_oracle(fmt):
    x = all_bf16_patterns()
    assert x.numel() == 65536 - 2 * 128  # exponent 0xFF (per sign: 1 infinity, 127 NaNs) dropped
    assert torch.equal(fp8.encode(x, fmt), oracle_encode(x, fmt))


@pytest.mark.parametrize("fmt", [FN, FNUZ])
@pytest.mark.parametrize("factor", [0.7071067690849304, 1.0 / 3.0, 2.0**-5 * 1.1, 448.0 / 13.0])
def test_encode_scaled_bf16_patterns_match_oracle(fmt, factor):
    # Scaling fills the low fp32 mantissa bits, as x / s does in a writer.
    x = all_bf16_patterns() * torch.tensor(factor, dtype=torch.float32)
    x = x[torch.isfinite(x)]
    assert torch.equal(fp8.encode(x, fmt), oracle_encode(x, fmt))


@pytest.mark.parametrize("fmt", [FN, FNUZ])
def test_encode_one_ulp_around_every_midpoint(fmt):
    # Midpoints between adjacent codes are exactly where a rounding bug shows; one fp32 ulp either
    # side must round to the nearer code.
    values = torch.tensor([bitfield_value(c, fmt) for c in range(128)], dtype=torch.float64)
    values = values[~torch.isnan(values)]
    mid = ((values[:-1] + values[1:]) / 2).float()  # exact: 5 significant bits
    x = torch.cat([mid, torch.nextafter(mid, torch.tensor(-1.0)), torch.nextafter(mid, torch.tensor(1e9))])
    x = torch.cat([x, -x])
    assert torch.equal(fp8.encode(x, fmt), oracle_encode(x, fmt))


@pytest.mark.parametrize("fmt", [FN, FNUZ])
def test_encode_matches_torch_cast_after_clamp(fmt):
    # SPEC.md section 4: clamp, then torch's CPU cast gave the hardware byte for every bf16 pattern.
    x = all_bf16_patterns()
    expected = x.clamp(-MAX[fmt], MAX[fmt]).to(fmt.torch_dtype()).view(torch.uint8)
    assert torch.equal(fp8.encode(x, fmt), expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=64))
def test_encode_random_fp32_matches_oracle(values):
    x = torch.tensor(values, dtype=torch.float32)
    for fmt in (FN, FNUZ):
        assert torch.equal(fp8.encode(x, fmt), oracle_encode(x, fmt))


@pytest.mark.parametrize("fmt", [FN, FNUZ])
def test_encode_nan_payloads(fmt):
    x = torch.tensor([math.nan, -math.nan], dtype=torch.float32)
    assert fp8.encode(x, fmt).tolist() == [fmt.nan_code] * 2


@pytest.mark.parametrize("fmt", [FN, FNUZ])
def test_decode_every_code_matches_bitfield_formula(fmt):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    decoded = fp8.decode(codes, fmt)
    expected = torch.tensor([bitfield_value(c, fmt) for c in range(256)], dtype=torch.float32)
    assert decoded.dtype == torch.float32
    assert torch.allclose(decoded, expected, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(torch.isnan(decoded), torch.isnan(expected))
    assert torch.equal(torch.signbit(decoded), torch.signbit(expected))  # 0x80 is -0.0 on fn
    # torch's own fp8 dtype is a second decoder written by other people
    assert torch.allclose(decoded, codes.view(fmt.torch_dtype()).float(), rtol=0, atol=0, equal_nan=True)
    assert [fp8.decode_byte(c, fmt) for c in range(256) if not math.isnan(expected[c])] == [
        expected[c].item() for c in range(256) if not math.isnan(expected[c])
    ]


@pytest.mark.parametrize("fmt", [FN, FNUZ])
def test_decode_then_encode_is_identity_on_every_non_nan_code(fmt):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    keep = ~fp8.is_nan_code(codes, fmt)
    assert torch.equal(fp8.encode(fp8.decode(codes[keep], fmt), fmt), codes[keep])


def test_nan_codes():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    assert fp8.is_nan_code(codes, FN).nonzero().flatten().tolist() == [0x7F, 0xFF]
    assert fp8.is_nan_code(codes, FNUZ).nonzero().flatten().tolist() == [0x80]


def distance(a: int, b: int, fmt: FP8Format) -> int:
    return int(fp8.code_distance(torch.tensor([a], dtype=torch.uint8), torch.tensor([b], dtype=torch.uint8), fmt)[0])


@pytest.mark.parametrize(
    "a, b, fmt, expected",
    [
        (0x38, 0x39, FN, 1),  # adjacent codes: 1.0 and 1.125
        (0x39, 0x38, FN, 1),  # symmetric
        (0x37, 0x38, FN, 1),  # across a binade: 0.9375 and 1.0
        (0x38, 0x38, FN, 0),
        (0x00, 0x80, FN, 0),  # +0 and -0 are the same value
        (0x01, 0x81, FN, 2),  # +2^-9 and -2^-9: via 0
        (0x08, 0x88, FN, 16),  # 8 steps to 0 on each side
        (0x7E, 0xFE, FN, 252),  # +448 to -448: 126 + 126
        (0x7F, 0x00, FN, fp8.NAN_DISTANCE),  # NaN vs a number
        (0x38, 0xFF, FN, fp8.NAN_DISTANCE),
        (0x7F, 0xFF, FN, 0),  # NaN vs NaN
        (0x40, 0x41, FNUZ, 1),
        (0x01, 0x81, FNUZ, 2),
        (0x7F, 0xFF, FNUZ, 254),  # +240 to -240: fnuz's 0x7F is a number
        (0x80, 0x00, FNUZ, fp8.NAN_DISTANCE),  # 0x80 is fnuz's NaN, not -0
        (0x80, 0x80, FNUZ, 0),
    ],
)
def test_code_distance_examples(a, b, fmt, expected):
    assert distance(a, b, fmt) == expected


def test_nan_distance_exceeds_every_real_distance():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    for fmt in (FN, FNUZ):
        keep = codes[~fp8.is_nan_code(codes, fmt)]
        d = fp8.code_distance(keep.view(-1, 1), keep.view(1, -1), fmt)
        assert int(d.max()) < fp8.NAN_DISTANCE
