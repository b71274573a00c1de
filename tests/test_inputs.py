"""Adversarial inputs: each distribution puts values where the writers' numerics are most fragile, the
same bits for the same seed, and inf/NaN only when asked for."""

from __future__ import annotations

import json

import pytest
import torch

from fp8check.core import fp8
from fp8check.cli import main
from fp8check.core.inputs import Distribution, generate, make_k
from fp8check.core.spec import CacheSpec, FP8Format

SPEC = CacheSpec(num_blocks=4)


def groups(spec: CacheSpec, k: torch.Tensor) -> torch.Tensor:
    return k.float().view(-1, spec.quant_block_size)


@pytest.mark.parametrize("distribution", list(Distribution))
def test_same_seed_same_bits_and_shape(distribution):
    a = generate(SPEC, seed=7, distribution=distribution, inf_nan=True)
    b = generate(SPEC, seed=7, distribution=distribution, inf_nan=True)
    assert a.k.dtype == torch.bfloat16 and a.k.shape == (SPEC.num_slots, SPEC.head_dim)
    assert torch.equal(a.k.view(torch.int16), b.k.view(torch.int16))
    assert distribution.value in a.source


@pytest.mark.parametrize("distribution", list(Distribution))
def test_inf_and_nan_only_when_asked(distribution):
    k = generate(SPEC, seed=1, distribution=distribution).k
    assert bool(torch.isfinite(k).all())
    with_specials = generate(SPEC, seed=1, distribution=distribution, inf_nan=True).k
    has_specials = bool((~torch.isfinite(with_specials)).any())
    assert has_specials is (distribution in (Distribution.SPECIALS, Distribution.MIXED))


@pytest.mark.parametrize("fmt", list(FP8Format))
def test_ue8m0_boundary_puts_amax_on_and_one_ulp_around_div_times_a_power_of_two(fmt):
    spec = SPEC.replace(fp8=fmt)
    amax = groups(spec, generate(spec, seed=3, distribution=Distribution.UE8M0_BOUNDARY).k).abs().amax(dim=1)
    divisors = [448.0] if fmt is FP8Format.E4M3FN else [240.0, 224.0]
    offsets = set()
    for value in amax.tolist():
        for div in divisors:
            mantissa, exponent = torch.frexp(torch.tensor(value / div, dtype=torch.float64))
            boundary = torch.tensor(div * 2.0 ** (int(exponent) - 1), dtype=torch.bfloat16)
            if float(mantissa) > 0.75:  # just below the next power of two
                boundary = torch.tensor(div * 2.0 ** int(exponent), dtype=torch.bfloat16)
            step = int(torch.tensor(value, dtype=torch.bfloat16).view(torch.int16)) - int(boundary.view(torch.int16))
            if abs(step) <= 1:
                offsets.add(step)
                break
        else:
            pytest.fail(f"amax {value} is not within one bf16 ulp of DIV * 2^k")
    assert offsets == {-1, 0, 1}


@pytest.mark.parametrize("fmt", list(FP8Format))
def test_ties_land_x_over_s_on_fp8_midpoints(fmt):
    spec = SPEC.replace(fp8=fmt)
    x = groups(spec, generate(spec, seed=5, distribution=Distribution.TIES).k)
    s = x.abs().amax(dim=1, keepdim=True) / fmt.max  # a power of two: ue8m0 and fp32 scales agree
    assert bool((torch.frexp(s).mantissa == 0.5).all())
    y = (x / s).abs()
    rest = y < fmt.max  # everything but each group's amax element
    codes = fp8.encode(y, fmt)
    low = fp8.decode(codes, fmt)
    neighbour = fp8.decode(torch.where(y > low, codes + 1, codes - 1), fmt)
    assert bool((2 * y == low + neighbour)[rest].all())
    assert int(rest.sum()) == y.numel() - y.shape[0]


def test_tiny_has_zero_rows_rows_below_the_scale_floor_and_denormals():
    k = generate(SPEC, seed=2, distribution=Distribution.TINY).k.float()
    amax = k.abs().amax(dim=1)
    assert bool((amax == 0).any())
    assert bool(((amax > 0) & (amax < 1e-4)).any())
    denormal = (k != 0) & (k.abs() < 2.0**-126)
    assert bool(denormal.all(dim=1).any()), "a row of denormals only"
    assert int(denormal.sum()) > 1000


def test_specials_mix_in_negative_zeros():
    k = generate(SPEC, seed=2, distribution=Distribution.SPECIALS).k
    assert int(((k == 0) & torch.signbit(k)).sum()) > 0.05 * k.numel()


def test_outliers_dwarf_the_rest_of_their_row():
    k = generate(SPEC, seed=2, distribution=Distribution.OUTLIERS).k.float().abs()
    assert bool((k.amax(dim=1) >= 64 * k.median(dim=1).values).all())


def test_mixed_draws_rows_from_the_others():
    k = generate(CacheSpec(num_blocks=16), seed=4, distribution=Distribution.MIXED).k.float()
    assert bool((k.abs().amax(dim=1) == 0).any())  # tiny's zero rows
    assert bool(((k == 0) & torch.signbit(k)).any())  # specials' -0


def test_make_k_keeps_its_positional_signature():
    k = make_k(8, 64, Distribution.NORMAL, torch.Generator().manual_seed(0))
    assert k.shape == (8, 64) and k.dtype == torch.bfloat16


def test_cli_inputs_option(capsys):
    code = main(["compare", "--baseline", "reference", "--candidate", "reference-vllm", "--inputs", "ties"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "ties K, sequential slots, seed 0" in out


def test_cli_specials_inf_nan_flag(capsys):
    code = main(["compare", "--baseline", "reference", "--candidate", "reference-vllm", "--inputs", "specials",
                 "--specials-inf-nan", "--device", "cpu", "--json", "-"])
    out, err = capsys.readouterr()
    payload = json.loads(out)
    assert code == 1 and "specials K with inf/NaN" in payload["inputs"]
    # aiter (reference) drops NaN from the amax and clamps a NaN value to -max; vLLM's numerics propagate
    # NaN: every differing byte sits in a group with inf or NaN in K
    assert [c["category"] for c in payload["diagnosis"]] == ["non-finite-input"]


def test_cli_rejects_unknown_inputs(capsys):
    code = main(["compare", "--inputs", "gaussian"])
    _, err = capsys.readouterr()
    assert code == 2 and "--inputs" in err
