"""The reference writers (PyTorch emulations of aiter and vLLM numerics, SPEC.md section 3)."""

from __future__ import annotations

import dataclasses
import math
import struct

import pytest
import torch

from fp8check.core import inputs
from fp8check.core import reference
from fp8check.producers import registry as producers
from fp8check.core.cache import CacheBuffer, poison
from fp8check.run.compare import compare
from fp8check.core.reference import AITER, VLLM
from fp8check.core.errors import SpecError
from fp8check.core.spec import CacheSpec, FP8Format, Layout, ScaleFormat
from conftest import aiter_shuffle

FN, FNUZ = FP8Format.E4M3FN, FP8Format.E4M3FNUZ
UE8M0, FP32 = ScaleFormat.UE8M0, ScaleFormat.FP32
PROFILES = [AITER, VLLM]


def row(*values: float, head_dim: int = 16) -> torch.Tensor:
    """One bf16 token [1, head_dim]: the values given, then zeros. Every value used is bf16-exact."""
    k = torch.zeros(1, head_dim, dtype=torch.bfloat16)
    k[0, : len(values)] = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16)
    assert k[0, : len(values)].float().tolist() == list(values)
    return k


def quantize(k, profile, fmt=FN, scale_fmt=UE8M0, qbs=None):
    return reference.quantize(k, profile=profile, fmt=fmt, scale_fmt=scale_fmt, quant_block_size=qbs or k.shape[1])


def fp32_bits(value: float) -> str:
    return struct.pack("<f", value).hex()


# ---- scales ------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_amax_448_gives_scale_one_and_plain_codes(profile):
    # s = 448 / 448 = 1 = 2^0: the codes are the plain e4m3fn encodings of the inputs.
    codes, scales = quantize(row(448.0, 1.0, -2.5, 0.0, -448.0), profile)
    assert scales.tolist() == [[1.0]]
    # 448 = 0x7E (max); 1.0 = field 7 -> 0x38; -2.5 = -2^1 * 1.25 -> 0x80 | (8 << 3) | 2 = 0xC2
    assert codes[0, :5].tolist() == [0x7E, 0x38, 0xC2, 0x00, 0xFE]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_amax_one_gives_ue8m0_scale_two_to_minus_8(profile):
    # s = 1/448 = 2^-8.81 -> ceil(log2 s) = -8 -> s = 2^-8; values are multiplied by 256.
    codes, scales = quantize(row(1.0, -0.5, 0.25, 2.0**-17), profile)
    assert scales.tolist() == [[2.0**-8]]
    # 256 = 2^8 -> field 15, m 0 = 0x78; -128 = -2^7 -> 0x80 | 14 << 3 = 0xF0; 64 = 2^6 -> 13 << 3 = 0x68;
    # 2^-17 * 256 = 2^-9 = smallest e4m3fn subnormal = 0x01
    assert codes[0, :4].tolist() == [0x78, 0xF0, 0x68, 0x01]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_zero_row_gets_floor_scale(profile):
    # s = 1e-4 / 448 = 2.23e-7; 2^-23 = 1.19e-7 < s <= 2^-22 = 2.38e-7 -> 2^-22
    codes, scales = quantize(torch.zeros(1, 16, dtype=torch.bfloat16), profile)
    assert scales.tolist() == [[2.0**-22]]
    assert codes.tolist() == [[0] * 16]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_negative_zero_is_0x80_on_fn_and_0x00_on_fnuz(profile):
    k = row(-0.0, 0.0, 1.0)
    assert quantize(k, profile, FN)[0][0, :3].tolist() == [0x80, 0x00, 0x78]
    # fnuz: 1 / 240 -> 2^-7 (aiter); 1 / 224 -> 2^-7 (vllm): 1.0 * 128 = 2^7 -> field 15 = 0x78
    assert quantize(k, profile, FNUZ)[0][0, :3].tolist() == [0x00, 0x00, 0x78]


def test_fnuz_divisors_differ_and_change_the_ue8m0_scale():
    assert (AITER.divisor(FNUZ), VLLM.divisor(FNUZ)) == (240.0, 224.0)
    assert (AITER.divisor(FN), VLLM.divisor(FN)) == (448.0, 448.0)
    k = row(230.0, 115.0)
    # aiter: 230 / 240 = 0.958 -> 2^0 = 1; vllm: 230 / 224 = 1.027 -> 2^1 = 2
    aiter_codes, aiter_scales = quantize(k, AITER, FNUZ)
    vllm_codes, vllm_scales = quantize(k, VLLM, FNUZ)
    assert aiter_scales.tolist() == [[1.0]]
    assert vllm_scales.tolist() == [[2.0]]
    # aiter 230 on fnuz: [128, 256) quantum 16, 14.375 -> 14 -> m 6, field 7 + 8 = 15 -> 0x7E (224)
    #       115: [64, 128) quantum 8, 14.375 -> 14 -> m 6, field 14 -> 0x76 (112)
    # vllm  230 / 2 = 115 -> 0x76;  115 / 2 = 57.5: [32, 64) quantum 4, 14.375 -> 14 -> field 13 -> 0x6E
    assert aiter_codes[0, :2].tolist() == [0x7E, 0x76]
    assert vllm_codes[0, :2].tolist() == [0x76, 0x6E]
    # the same row on e4m3fn: 230 / 448 = 0.51 -> 2^0 for both
    assert quantize(k, AITER, FN)[1].tolist() == quantize(k, VLLM, FN)[1].tolist() == [[1.0]]


def test_fp32_scales_reciprocal_and_division_differ_by_one_code():
    # amax 13: s = fl(13 / 448) = 0x1.db6db6p-6, just below 13/448 (13/7 = 1.110110110...b rounds down).
    # x = 9.75 = 0.75 * 13, so x / s is 336 (= 0.75 * 448) plus 9e-6, which rounds to exactly 336.0:
    # the midpoint of 320 (m 2) and 352 (m 3) in e4m3fn -> ties to even -> 320 = 0x7A.
    # fl(1/s) = 0x1.13b13cp+5 rounds up, and 9.75 * fl(1/s) = 336.0000305 -> 352 = 0x7B.
    s = torch.tensor(13.0) / 448.0
    assert s.item() == float.fromhex("0x1.db6db6p-6")
    assert (torch.tensor(9.75) / s).item() == 336.0
    assert (torch.tensor(9.75) * (1.0 / s)).item() == float.fromhex("0x1.500002p+8")  # 336 + 2^-15, one ulp above
    k = row(13.0, 9.75)
    aiter_codes, aiter_scales = quantize(k, AITER, FN, FP32)
    vllm_codes, vllm_scales = quantize(k, VLLM, FN, FP32)
    assert fp32_bits(aiter_scales.item()) == fp32_bits(vllm_scales.item()) == "dbb6ed3c"  # LE 0x3cedb6db
    assert aiter_codes[0, :2].tolist() == [0x7E, 0x7B]  # 13 * fl(1/s) = 448.00003 -> clamped to 448
    assert vllm_codes[0, :2].tolist() == [0x7E, 0x7A]  # 13 / s = 448.00003 -> saturates to 448


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_fp32_scale_is_not_rounded_to_a_power_of_two(profile):
    _, scales = quantize(row(13.0), profile, FN, FP32)
    assert scales.item() == float.fromhex("0x1.db6db6p-6")
    _, scales = quantize(row(13.0), profile, FN, UE8M0)
    assert scales.item() == 2.0**-5  # 13/448 = 2^-5.1 -> 2^-5


def test_pow2_ceil_is_exact_at_and_around_powers_of_two():
    # 2^k stays 2^k; one fp32 ulp above goes to 2^(k+1); one ulp below stays 2^k.
    powers = torch.tensor([2.0**k for k in range(-30, 20)])
    up = torch.nextafter(powers, torch.tensor(math.inf))
    down = torch.nextafter(powers, torch.tensor(0.0))
    assert torch.equal(reference.pow2_ceil(powers), powers)
    assert torch.equal(reference.pow2_ceil(up), powers * 2)
    assert torch.equal(reference.pow2_ceil(down), powers)
    assert reference.pow2_ceil(torch.tensor([13.0 / 448.0, 1e-4 / 448.0])).tolist() == [2.0**-5, 2.0**-22]


@pytest.mark.parametrize("scale_fmt", [UE8M0, FP32])
@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_inf_in_k_gives_an_inf_scale(profile, scale_fmt):
    # s = inf / 448 = inf, and 2^ceil(log2(inf)) = inf. Values: 2 * fl(1/inf) = 2 * 0 = 0 (aiter) and
    # 2 / inf = 0 (vllm) -> 0x00; inf * 0 and inf / inf are NaN: vllm writes the NaN code (0x7F on fn,
    # 0x80 on fnuz); aiter's clamp v_med3_f32(NaN, -max, max) gives -max (0xFE on fn, 0xFF on fnuz).
    nan_fn, nan_fnuz = (0xFE, 0xFF) if profile is AITER else (0x7F, 0x80)
    codes, scales = quantize(row(math.inf, 2.0), profile, FN, scale_fmt)
    assert scales.tolist() == [[math.inf]]
    assert codes[0, :2].tolist() == [nan_fn, 0x00]
    codes, scales = quantize(row(math.inf, 2.0), profile, FNUZ, scale_fmt)
    assert scales.tolist() == [[math.inf]]
    assert codes[0, :2].tolist() == [nan_fnuz, 0x00]


@pytest.mark.parametrize("fmt, minus_max", [(FN, 0xFE), (FNUZ, 0xFF)], ids=["e4m3fn", "e4m3fnuz"])
def test_aiter_amax_drops_nan_and_writes_the_nan_element_as_minus_max(fmt, minus_max):
    # aiter's IEEE-mode v_max3_f32 / fmaxf ignore the NaN: the scale is that of the other elements
    # (amax 7 -> s = 7/max), they quantize as without the NaN, and the NaN element clamps to -max.
    k = row(0.0, 7.0, -3.5)
    k[0, 0] = math.nan
    codes, scales = quantize(k, AITER, fmt, FP32)
    expected_scale = torch.tensor(7.0) / torch.tensor(fmt.max)
    assert scales.tolist() == [[expected_scale.item()]]
    clean, _ = quantize(row(0.0, 7.0, -3.5), AITER, fmt, FP32)
    assert codes[0, 0].item() == minus_max
    assert torch.equal(codes[0, 1:], clean[0, 1:])
    # vLLM's writer keeps the NaN: the whole group's scale is NaN
    _, vllm_scales = quantize(k, VLLM, fmt, FP32)
    assert math.isnan(vllm_scales.item())


def test_scale_per_quant_group():
    # qbs 16 over head_dim 32: group 0 has amax 448 (s = 1), group 1 amax 1 (s = 2^-8)
    k = torch.zeros(1, 32, dtype=torch.bfloat16)
    k[0, 0], k[0, 16] = 448.0, 1.0
    for profile in PROFILES:
        codes, scales = quantize(k, profile, qbs=16)
        assert scales.tolist() == [[1.0, 2.0**-8]]
        assert codes[0, [0, 16]].tolist() == [0x7E, 0x78]


def test_aiter_flushes_fp32_denormal_inputs():
    assert AITER.flush_denormals and not VLLM.flush_denormals
    # With the real divisors a denormal times 1/s (< 2^23) is far below the smallest fp8 subnormal, so
    # the flush cannot change a byte. A divisor of 2^110 makes it visible: the floor scale is
    # 1e-4 / 2^110 = 2^-123.3 -> 2^-123, and the bf16 denormal 2^-127 * 2^123 = 2^-4 -> field 3 = 0x18.
    k = row(2.0**-127, -(2.0**-127))
    flushing = dataclasses.replace(AITER, divisor_fn=2.0**110)
    keeping = dataclasses.replace(flushing, flush_denormals=False)
    assert quantize(k, keeping)[0][0, :2].tolist() == [0x18, 0x98]
    assert quantize(k, flushing)[0][0, :2].tolist() == [0x00, 0x80]  # the sign survives the flush
    assert quantize(k, flushing)[1].item() == quantize(k, keeping)[1].item() == 2.0**-123


@pytest.mark.parametrize("fmt", [FN, FNUZ])
def test_ue8m0_codes_are_within_half_a_quantum(fmt):
    # Independent of the byte details: decode(code) * s lies within half an fp8 quantum of x / s.
    k = inputs.make_k(64, 128, inputs.Distribution.NORMAL, torch.Generator().manual_seed(3))
    codes, scales = quantize(k, AITER, fmt, qbs=32)
    y = k.float().view(64, 4, 32) / scales.unsqueeze(-1)
    assert float(y.abs().max()) <= fmt.max
    decoded = codes.view(torch.uint8).view(fmt.torch_dtype()).float().view(64, 4, 32)
    min_exp = 1 - fmt.bias
    quantum = torch.exp2(torch.floor(torch.log2(y.abs().clamp(min=2.0**min_exp))) - 3)
    assert bool(((decoded - y).abs() <= quantum / 2).all())


# ---- writing into the cache -------------------------------------------------------------------


def unshuffle_values(value_region: torch.Tensor, block_size: int, head_dim: int) -> torch.Tensor:
    """Undo aiter's shuffle_weight (16, 16) on one block's value bytes -> [block_size, head_dim]."""
    ids = aiter_shuffle(torch.arange(block_size * head_dim).view(block_size, head_dim)).view(-1)
    codes = torch.empty_like(value_region)
    codes[ids] = value_region  # the byte at position p belongs to (token, dim) number ids[p]
    return codes.view(block_size, head_dim)


def read_block(spec: CacheSpec, block_bytes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(fp8 codes [block_size, head_dim], raw scale bytes [block_size, 4 * groups]) of one flat block."""
    values = block_bytes[: spec.block_size * spec.head_dim]
    if spec.layout is Layout.SHUFFLE:
        codes = unshuffle_values(values, spec.block_size, spec.head_dim)
    else:
        codes = values.view(spec.block_size, spec.head_dim)
    return codes, block_bytes[spec.block_size * spec.head_dim :].view(spec.block_size, -1)


def fp32_le(raw: torch.Tensor) -> list[float]:
    """Little-endian fp32 words of a byte row, decoded by struct (not by torch)."""
    return list(struct.unpack(f"<{raw.numel() // 4}f", bytes(raw.tolist())))


WRITE_SPECS = [
    CacheSpec(num_blocks=2, block_size=16, head_dim=32, quant_block_size=16),
    CacheSpec(num_blocks=3, block_size=32, head_dim=64, quant_block_size=64, fp8=FNUZ),
    CacheSpec(num_blocks=2, block_size=16, head_dim=32, quant_block_size=32, layout=Layout.LINEAR),
    CacheSpec(num_blocks=4, block_size=1, head_dim=32, quant_block_size=32, scale_fmt=FP32),
]


def write(spec: CacheSpec, writer, k, slot_mapping) -> CacheBuffer:
    buffer = CacheBuffer.allocate(spec, "cpu")
    writer(k, buffer.cache, slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg,
           fp8_dtype=spec.fp8.torch_dtype(), layout=spec.layout.value)
    return buffer


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
@pytest.mark.parametrize("spec", WRITE_SPECS, ids=lambda s: s.summary())
def test_writer_puts_every_byte_at_its_layout_position(spec, profile):
    # Shuffled slots with -1 padding mixed in; slots 1 and the last one get no token at all.
    generator = torch.Generator().manual_seed(7)
    slot_mapping = inputs.make_slot_mapping(spec, inputs.SlotPattern.PADDED, generator)
    slot_mapping[(slot_mapping == 1) | (slot_mapping == spec.num_slots - 1)] = -1
    k = inputs.make_k(slot_mapping.numel(), spec.head_dim, inputs.Distribution.NORMAL, generator)
    assert bool((slot_mapping < 0).any())
    buffer = write(spec, reference.make_writer(profile), k, slot_mapping)
    codes, scales = quantize(k, profile, spec.fp8, spec.scale_fmt, spec.quant_block_size)

    fresh = poison(buffer.buffer.numel())
    guard = buffer.guard_bytes
    assert torch.equal(buffer.buffer[:guard], fresh[:guard])
    assert torch.equal(buffer.buffer[-guard:], fresh[-guard:])
    fresh_flat = fresh[guard:-guard].view(spec.num_blocks, -1)
    token_of_slot = {int(s): i for i, s in enumerate(slot_mapping.tolist()) if s >= 0}
    for block in range(spec.num_blocks):
        got_codes, got_scales = read_block(spec, buffer.flat[block])
        untouched_codes, untouched_scales = read_block(spec, fresh_flat[block])
        for t in range(spec.block_size):
            token = token_of_slot.get(block * spec.block_size + t)
            if token is None:  # nothing written: the poison stays, value and scale bytes alike
                assert torch.equal(got_codes[t], untouched_codes[t])
                assert torch.equal(got_scales[t], untouched_scales[t])
            else:
                assert torch.equal(got_codes[t], codes[token])
                assert fp32_le(got_scales[t]) == scales[token].tolist()


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_negative_slots_write_nothing(profile):
    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=32, quant_block_size=32)
    k = torch.randn(4, 32, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    buffer = write(spec, reference.make_writer(profile), k, torch.full((4,), -1, dtype=torch.int64))
    assert torch.equal(buffer.buffer, poison(buffer.buffer.numel()))


def test_writer_does_not_modify_its_inputs():
    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=32, quant_block_size=16)
    data = inputs.generate(spec, seed=5, slots=inputs.SlotPattern.PADDED)
    k, slots = data.k.clone(), data.slot_mapping.clone()
    write(spec, reference.aiter_writer, data.k, data.slot_mapping)
    assert torch.equal(data.k, k) and torch.equal(data.slot_mapping, slots)


def test_slot_outside_the_cache_is_an_error():
    spec = CacheSpec(num_blocks=1, block_size=16, head_dim=32, quant_block_size=32)
    with pytest.raises(ValueError, match="slot 16 is outside the cache"):
        write(spec, reference.aiter_writer, torch.zeros(1, 32, dtype=torch.bfloat16), torch.tensor([16]))


# ---- what `fp8check compare` reports between the two profiles ------------------------------------


def compare_profiles(spec: CacheSpec):
    return compare(
        spec, baseline=producers.resolve("reference"), candidate=producers.resolve("reference-vllm"),
        inputs=inputs.generate(spec, seed=0), device=torch.device("cpu"),
    )


def test_profiles_identical_on_e4m3fn_ue8m0():
    # SPEC.md section 3: power-of-two scales and the same divisor 448 -> byte for byte equal.
    result = compare_profiles(CacheSpec(num_blocks=3, block_size=64, head_dim=128, quant_block_size=128))
    assert result.identical
    assert result.diff.first_mismatch is None
    assert [(b.value_diff, b.scale_diff) for b in result.diff.all_rows()] == [(0, 0)] * 3
    assert result.diff.total_bytes == 3 * 64 * (128 + 4)


def test_profiles_differ_in_every_block_on_e4m3fnuz():
    spec = CacheSpec(num_blocks=3, block_size=64, head_dim=128, quant_block_size=128, fp8=FNUZ)
    result = compare_profiles(spec)
    assert not result.identical
    assert all(b.value_diff > 0 and b.scale_diff > 0 for b in result.diff.all_rows())
    # exactly the tokens whose amax lies in (224 * 2^j, 240 * 2^j] get different scales
    k = inputs.generate(spec, seed=0).k.float()
    amax = k.abs().amax(dim=1).clamp(min=1e-4)
    window = torch.ceil(torch.log2(amax / 240.0)) != torch.ceil(torch.log2(amax / 224.0))
    differs = torch.cat([
        (read_block(spec, result.baseline.buffer.flat[b])[1] != read_block(spec, result.candidate.buffer.flat[b])[1])
        .any(dim=1)
        for b in range(3)
    ])  # sequential slots: token i sits at slot i
    assert bool(window.any())
    assert torch.equal(differs, window)


def test_a_writer_called_with_another_fp8_dtype_names_the_formats():
    spec = CacheSpec(num_blocks=1, block_size=16, head_dim=64, quant_block_size=64)
    cache = torch.zeros(spec.num_blocks, spec.block_bytes, dtype=torch.uint8)
    k, slots = torch.ones(16, 64, dtype=torch.bfloat16), torch.arange(16)
    with pytest.raises(SpecError, match=r"^fp8_dtype torch.float8_e5m2: the formats are torch.float8_e4m3fn,"
                                        r" torch.float8_e4m3fnuz$"):
        reference.aiter_writer(k, cache, slots, 64, "ue8m0", fp8_dtype=torch.float8_e5m2)
