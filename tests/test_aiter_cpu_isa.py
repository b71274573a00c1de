"""The emulated AMDGPU instructions (aiter_cpu/runtime/include/hipcpu/isa.hpp) against AMD's documented
rules, each input class checked against an independent computation: numpy/torch IEEE arithmetic for
finite values, the ISA's NaN / signed-zero / denormal-flush rules written out here, and torch's own
FP8 conversions (after the saturating clamp) for every FP8 code."""

from __future__ import annotations

import ctypes
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from fp8check.hip_cpu import compiler as compilers
from fp8check.hip_cpu.build import RUNTIME

HERE = Path(__file__).parent / "aiter_cpu"
COMPILER = compilers.find()
pytestmark = pytest.mark.skipif(COMPILER is None, reason=f"no clang >= 20 ({compilers.INSTALL_HINT})")

QNAN = struct.unpack("<f", struct.pack("<I", 0x7FC00000))[0]
DENORMAL = struct.unpack("<f", struct.pack("<I", 0x00000005))[0]


def bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f32(u: int) -> float:
    return struct.unpack("<f", struct.pack("<I", u))[0]


@pytest.fixture(scope="module")
def isa(tmp_path_factory):
    out = tmp_path_factory.mktemp("isa") / "isa_probe.so"
    subprocess.run([*COMPILER.command, "-std=c++20", "-O2", "-fPIC", "-shared", "-ffp-contract=off",
                    "-I", str(RUNTIME / "include"), str(HERE / "isa_probe.cpp"), "-o", str(out)], check=True)
    lib = ctypes.CDLL(str(out))
    for name in ("probe_max3", "probe_min3", "probe_med3"):
        getattr(lib, name).restype = ctypes.c_float
        getattr(lib, name).argtypes = [ctypes.c_float] * 3
    lib.probe_mul.restype = ctypes.c_float
    lib.probe_mul.argtypes = [ctypes.c_float] * 2
    lib.probe_cvt_pk.restype = ctypes.c_uint
    lib.probe_cvt_pk.argtypes = [ctypes.c_float, ctypes.c_float, ctypes.c_uint, ctypes.c_int, ctypes.c_int]
    return lib


def test_max3_min3_finite_values_are_the_ordinary_maximum_and_minimum(isa):
    rng = np.random.default_rng(0)
    for a, b, c in rng.standard_normal((200, 3)).astype(np.float32) * 1e3:
        assert isa.probe_max3(a, b, c) == max(a, b, c)
        assert isa.probe_min3(a, b, c) == min(a, b, c)


def test_max_and_min_order_negative_zero_below_positive_zero(isa):
    assert bits(isa.probe_max3(-0.0, 0.0, -0.0)) == 0x00000000
    assert bits(isa.probe_max3(-0.0, -0.0, -0.0)) == 0x80000000
    assert bits(isa.probe_min3(0.0, -0.0, 0.0)) == 0x80000000


def test_ieee_mode_max_drops_a_quiet_nan(isa):
    # (ctypes passes floats through a double, which quiets a signalling NaN: only quiet NaNs are probed)
    assert isa.probe_max3(QNAN, 2.0, 1.0) == 2.0
    assert isa.probe_max3(3.0, QNAN, QNAN) == 3.0
    assert isa.probe_min3(QNAN, -2.0, 1.0) == -2.0
    assert np.isnan(isa.probe_max3(QNAN, QNAN, QNAN))


def test_denormal_inputs_read_as_zero_under_flush_mode(isa):
    assert bits(isa.probe_max3(DENORMAL, 0.0, -1.0)) == 0x00000000
    assert bits(isa.probe_max3(-DENORMAL, -1.0, -2.0)) == 0x80000000
    assert isa.probe_mul(DENORMAL, 1e30) == 0.0
    assert bits(isa.probe_mul(f32(0x00800000), 0.5)) == 0x00000000  # a denormal product is written as zero


def test_med3_of_numbers_is_the_median(isa):
    rng = np.random.default_rng(1)
    for row in rng.standard_normal((200, 3)).astype(np.float32):
        assert isa.probe_med3(*row) == np.median(row)
    assert isa.probe_med3(1000.0, -448.0, 448.0) == 448.0
    assert isa.probe_med3(float("-inf"), -448.0, 448.0) == -448.0


def test_med3_with_a_nan_input_is_the_min3_of_the_inputs(isa):
    # AMD ISA V_MED3_F32: any NaN input -> V_MIN3_F32(S0, S1, S2); IEEE-mode min drops the quiet NaN.
    assert isa.probe_med3(QNAN, -448.0, 448.0) == -448.0
    assert isa.probe_med3(QNAN, -240.0, 240.0) == -240.0
    assert isa.probe_med3(5.0, QNAN, 448.0) == 5.0


def test_mul_is_one_rne_product_in_fp32(isa):
    rng = np.random.default_rng(2)
    a = rng.standard_normal(500).astype(np.float32) * 100
    b = rng.standard_normal(500).astype(np.float32) * 100
    for x, y in zip(a, b):
        assert bits(isa.probe_mul(x, y)) == bits(float(np.float32(x) * np.float32(y)))


@pytest.mark.parametrize("fnuz", [False, True], ids=["e4m3fn", "e4m3fnuz"])
def test_fp8_conversion_matches_torch_on_every_code_and_every_midpoint(isa, fnuz):
    dtype = torch.float8_e4m3fnuz if fnuz else torch.float8_e4m3fn
    fmax = 240.0 if fnuz else 448.0
    codes = torch.arange(256, dtype=torch.uint8).view(dtype).float()
    finite = codes[torch.isfinite(codes)].unique()
    # every representable value, every midpoint between neighbours (ties to even), and points off them
    mids = (finite[1:] + finite[:-1]) / 2
    values = torch.cat([finite, mids, mids * (1 + 2**-12), mids * (1 - 2**-12)]).float()
    values = values[(values.abs() <= fmax)]
    for x in values.tolist():
        expected = torch.tensor([x]).to(dtype).view(torch.uint8).item()
        if fnuz is False and x == 0 and str(x).startswith("-"):
            expected = 0x80
        got = isa.probe_cvt_pk(x, 0.0, 0, 0, int(fnuz)) & 0xFF
        assert got == expected, (x, hex(got), hex(expected))


@pytest.mark.parametrize("fnuz", [False, True], ids=["e4m3fn", "e4m3fnuz"])
def test_fp8_conversion_saturates_and_encodes_nan_and_zeros(isa, fnuz):
    max_code, nan = (0x7F, 0x80) if fnuz else (0x7E, 0x7F)
    assert isa.probe_cvt_pk(1e6, -1e6, 0, 0, int(fnuz)) & 0xFFFF == max_code | ((max_code | 0x80) << 8)
    assert isa.probe_cvt_pk(float("inf"), 0.0, 0, 0, int(fnuz)) & 0xFF == max_code
    assert isa.probe_cvt_pk(QNAN, 0.0, 0, 0, int(fnuz)) & 0xFF == nan
    assert isa.probe_cvt_pk(-0.0, 0.0, 0, 0, int(fnuz)) & 0xFF == (0x00 if fnuz else 0x80)  # FNUZ has no -0
    assert isa.probe_cvt_pk(-DENORMAL, 0.0, 0, 0, int(fnuz)) & 0xFF == (0x00 if fnuz else 0x80)


def test_fp8_pair_goes_to_the_selected_half_and_keeps_the_other(isa):
    assert isa.probe_cvt_pk(1.0, 2.0, 0xAABBCCDD, 0, 0) == 0xAABB0000 | 0x38 | (0x40 << 8)
    assert isa.probe_cvt_pk(1.0, 2.0, 0xAABBCCDD, 1, 0) == 0x0000CCDD | ((0x38 | (0x40 << 8)) << 16)


@pytest.mark.parametrize("fnuz", [False, True], ids=["e4m3fn", "e4m3fnuz"])
def test_fp8_to_f32_decodes_every_code_as_torch_does(isa, fnuz):
    isa.probe_cvt_f32.restype = ctypes.c_float
    isa.probe_cvt_f32.argtypes = [ctypes.c_uint, ctypes.c_int, ctypes.c_int]
    dtype = torch.float8_e4m3fnuz if fnuz else torch.float8_e4m3fn
    decoded = torch.arange(256, dtype=torch.uint8).view(dtype).float().tolist()
    for code, expected in enumerate(decoded):
        got = isa.probe_cvt_f32(code << 16, 2, int(fnuz))
        assert (np.isnan(got) and np.isnan(expected)) or bits(got) == bits(expected), (hex(code), got, expected)
