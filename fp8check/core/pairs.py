"""Byte-pair tests, each defined once: what one FP8 byte against another can mean (docs/NUMERICS.md).
Each takes uint8 tensors of the two caches' bytes (baseline, candidate; any shape, any device) and
answers with a bool tensor of that shape; `pair_table` makes a test a lookup over all 65536 pairs."""

from __future__ import annotations

import functools

import torch

from . import fp8
from .spec import FP8Format


def other_format(fmt: FP8Format) -> FP8Format:
    """The format a writer may have cast to instead of `fmt`."""
    return FP8Format.E4M3FNUZ if fmt is FP8Format.E4M3FN else FP8Format.E4M3FN


def zero_pair(base: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """Both bytes are zeros of either sign (0x00 / 0x80): evidence of `signed-zero` only."""
    return ((base | cand) & 0x7F) == 0


def one_code_apart(base: torch.Tensor, cand: torch.Tensor, fmt: FP8Format) -> torch.Tensor:
    """fp8.code_distance(base, cand) == 1, in uint8 arithmetic (a third of its cost on big chunks): same
    sign and magnitudes one apart, or opposite signs with magnitudes 0 and 1; never a NaN."""
    mb, mc = base & 0x7F, cand & 0x7F
    same_sign = ((base ^ cand) & 0x80) == 0
    apart = torch.where(same_sign, ((mb - mc) == 1) | ((mc - mb) == 1), (mb + mc) == 1)
    return apart & ~fp8.is_nan_code(base, fmt) & ~fp8.is_nan_code(cand, fmt)


def extreme(base: torch.Tensor, cand: torch.Tensor, fmt: FP8Format) -> tuple[torch.Tensor, ...]:
    """(base at +-max, cand at +-max, base NaN, cand NaN): the bytes of saturation against NaN."""
    top = fp8.decode_table(fmt).index(fmt.max)  # the +max code, what a saturating cast gives out of range
    return ((base & 0x7F) == top, (cand & 0x7F) == top, fp8.is_nan_code(base, fmt), fp8.is_nan_code(cand, fmt))


def format_match(fmt: FP8Format, base: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """The candidate byte encodes the baseline's value in the other format (one code of slack for the
    double rounding at the formats' different subnormal steps). Zeros prove nothing: e4m3fnuz has no -0, so
    a -0 that lost its sign would look like a format change (it is `signed-zero`)."""
    other = other_format(fmt)
    predicted = fp8.encode(torch.tensor(fp8.decode_table(fmt), device=base.device), other)[base.long()]
    nan_p, nan_c = fp8.is_nan_code(predicted, other), fp8.is_nan_code(cand, other)
    # fp8.code_distance <= 1, in uint8 arithmetic: equal, both NaN, +0 against -0, or one code apart
    close = (cand == predicted) | (nan_p & nan_c) | (zero_pair(predicted, cand) & ~nan_p & ~nan_c)
    close |= one_code_apart(predicted, cand, other)
    return close & ~zero_pair(base, cand)


def byte_local(fmt: FP8Format, base: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """uint8: 1 where signed-zero or saturation-nan may explain the pair, 2 where only rounding may, else 0."""
    base_max, cand_max, base_nan, cand_nan = extreme(base, cand, fmt)
    always = zero_pair(base, cand) | base_max | cand_max | base_nan | cand_nan
    return torch.where(always, 1, torch.where(one_code_apart(base, cand, fmt), 2, 0)).to(torch.uint8)


# ---- integer conversion of the quotient (docs/NUMERICS.md) ------------------------------------------------
def cast_match(y: torch.Tensor, base: torch.Tensor, cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(match, wrapped) bool: the candidate byte is an integer conversion of the quotient y = x/s to uint8,
    under any convention seen on real platforms; wrapped: a negative quotient that wrapped (-1 -> 255)
    rather than became 0. y of any float dtype."""
    whole = torch.trunc(y)
    wrap = torch.remainder(whole, 256)  # numpy astype, the Triton interpreter: -1 -> 255, 300 -> 44
    finite = wrap == wrap  # NaN exactly where y is +-inf or NaN
    # the rest in bytes (half the time of float compares): a finite y's wrap is a whole number in [0, 255]
    wrap_byte = torch.where(finite, wrap, 0).to(torch.uint8)
    match = (cand == wrap_byte) & finite
    negative = whole < 0
    wrapped = match & negative
    is_zero, is_max = cand == 0, cand == 255
    match |= negative & is_zero  # NVIDIA: negatives -> 0 (and > 255 wraps, as above)
    match |= (whole > 255) & is_max  # a saturating conversion
    # floor: the seed's AMD report, -0.3 -> 255; cand + 1 wraps 255 to 0 as (wrap - 1) mod 256 takes 0 to 255
    match |= (y < whole) & (cand + 1 == wrap_byte)
    match |= ~finite & (is_zero | is_max)
    match &= ~zero_pair(base, cand)
    return match, wrapped & match


def cast_match_fp32(y: torch.Tensor, base: torch.Tensor, cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cast_match for fp32 quotients, through int32 and bytes instead of float trunc and remainder: an fp32
    |y| >= 2**31 is a whole multiple of 256 (its ulp is >= 256), so its trunc is 0 mod 256."""
    small = y.abs() < 2.0**31  # False for +-inf and NaN
    whole = torch.where(small, y, 0).to(torch.int32)  # trunc
    wrap_byte = whole.to(torch.uint8)  # the low byte: mod 256, -1 -> 255
    finite = torch.isfinite(y)
    match = (cand == wrap_byte) & finite
    negative = y <= -1  # trunc(y) < 0, -inf included
    wrapped = match & negative
    match |= negative & (cand == 0)
    match |= (y >= 256) & (cand == 255)
    match |= small & (y < whole) & (cand + 1 == wrap_byte)  # floor: a negative y off the integers
    match |= ~finite & ((cand == 0) | (cand == 255))
    match &= ~zero_pair(base, cand)
    return match, wrapped & match


# ---- tables over all 65536 pairs ------------------------------------------------------------------------
def all_pairs(device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(base, cand) uint8 [65536]: every byte pair, at index base * 256 + cand."""
    codes = torch.arange(256, dtype=torch.uint8, device=device)
    return codes.repeat_interleave(256), codes.repeat(256)


@functools.lru_cache(maxsize=None)
def pair_table(test, fmt: FP8Format, device=None) -> torch.Tensor:
    """[65536]: test(fmt, base, cand) for every pair, for `lookup` (computed once; never write to it)."""
    return test(fmt, *all_pairs(device))


def lookup(table: torch.Tensor, base: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """table[base * 256 + cand], shaped like base."""
    key = base.int().bitwise_left_shift_(8).bitwise_or_(cand)
    return table.index_select(0, key.view(-1)).view(key.shape)
