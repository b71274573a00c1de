"""The HIP-on-CPU runtime (fp8check/hip_cpu/) on kernels written for these tests in aiter's style
(tests/aiter_cpu/wave_kernels.cu): wave-64 geometry, DPP reductions, inline asm, early exits. Each
result is checked against an independent computation in Python (torch for the numerics, the DPP rules
written out here for the lane patterns)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
import torch

from fp8check.hip_cpu import build, compiler as compilers

HERE = Path(__file__).parent / "aiter_cpu"
COMPILER = compilers.find()
pytestmark = pytest.mark.skipif(COMPILER is None, reason=f"no clang >= 20 ({compilers.INSTALL_HINT})")


class Kernels:
    def __init__(self, built: build.Built):
        self.built = built
        self.host, self.device = built.load()

    def call(self, name: str, *args) -> tuple[int, str | None, int]:
        self.device.hipcpu_reset()
        converted = [a.ctypes.data_as(ctypes.c_void_p) if isinstance(a, np.ndarray) else a for a in args]
        rc = getattr(self.host, name)(*converted)
        error = self.device.hipcpu_error()
        return rc, error.decode() if error else None, int(self.device.hipcpu_undefined_reads())


@pytest.fixture(scope="module", params=["gfx950", "gfx942"])
def kernels(request, tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("FP8CHECK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    unit = build.Unit(HERE, ("wave_kernels.cu",), "wave_kernels.cu", (".",))
    return Kernels(build.build(unit, request.param, COMPILER))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_build_finds_the_launched_kernels_and_rewrites_the_asm(kernels):
    assert "_ZN5testk12quant_groupsEPKfPhPfii" in kernels.built.kernels
    assert kernels.built.asm_statements == 4
    assert kernels.built.poisoned_builtins == 1  # __builtin_amdgcn_permlanex16


def test_row_reduction_and_fp8_conversion_match_an_independent_quantizer(kernels):
    fnuz = kernels.built.arch == "gfx942"
    fmax, dtype = (240.0, torch.float8_e4m3fnuz) if fnuz else (448.0, torch.float8_e4m3fn)
    gen = torch.Generator().manual_seed(0)
    groups = 37  # 5 blocks, the last one partly empty: rows past the end return at once
    x = torch.randn(groups, 128, generator=gen) * torch.rand(groups, 1, generator=gen) * 10
    x[3] = 0.0  # amax below the 1e-4 floor
    out = np.zeros(groups * 128, np.uint8)
    scales = np.zeros(groups, np.float32)
    rc, error, undefined = kernels.call("run_quant", x.numpy(), out, scales, groups, -1)
    assert (rc, error, undefined) == (0, None, 0)
    scale = x.abs().amax(dim=1).clamp(min=1e-4) / fmax
    assert torch.equal(torch.from_numpy(scales), scale)
    inverse = 1.0 / scale
    expected = (x * inverse[:, None]).clamp(-fmax, fmax).to(dtype).view(torch.uint8)
    assert torch.equal(torch.from_numpy(out).view(groups, 128), expected)


def test_a_row_that_returns_early_leaves_its_bytes_and_reads_no_other_row(kernels):
    x = torch.ones(16, 128)
    out = np.full(16 * 128, 0xAA, np.uint8)
    scales = np.zeros(16, np.float32)
    rc, error, undefined = kernels.call("run_quant", x.numpy(), out, scales, 16, 5)
    assert (rc, error, undefined) == (0, None, 0)
    rows = out.reshape(16, 128)
    assert (rows[5] == 0xAA).all()
    assert (np.delete(rows, 5, axis=0) != 0xAA).all()


def _dpp_expected(ctrl: int, row_mask: int, bank_mask: int, bound_ctrl: bool, old: int) -> list[int]:
    """The GFX9 DPP rules (AMD Vega/CDNA ISA, "DPP"), lane by lane, for source values lane*10+1."""
    out = []
    for lane in range(64):
        row, in_row = lane // 16, lane % 16
        if ctrl <= 0xFF:
            src = (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3)
        elif 0x111 <= ctrl <= 0x11F:
            src = lane - (ctrl & 15) if in_row >= (ctrl & 15) else None
        elif 0x101 <= ctrl <= 0x10F:
            src = lane + (ctrl & 15) if in_row + (ctrl & 15) < 16 else None
        elif ctrl == 0x140:
            src = row * 16 + 15 - in_row
        elif ctrl == 0x141:
            src = (lane & ~7) + 7 - (lane & 7)
        elif ctrl == 0x142:
            src = row * 16 - 1 if row > 0 else None
        elif ctrl == 0x143:
            src = 31 if row >= 2 else None
        if not (row_mask >> row) & 1 or not (bank_mask >> (in_row // 4)) & 1:
            out.append(old)
        elif src is None:
            out.append(0 if bound_ctrl else old)
        else:
            out.append(src * 10 + 1)
    return out


@pytest.mark.parametrize("which, ctrl, row_mask, bank_mask, bound_ctrl", [
    (0, 0xB1, 0xF, 0xF, False), (1, 0x4E, 0xF, 0xF, False), (2, 0x141, 0xF, 0xF, False),
    (3, 0x140, 0xF, 0xF, False), (4, 0x111, 0xF, 0xF, True), (5, 0x111, 0xF, 0xF, False),
    (6, 0x142, 0xA, 0xF, False), (7, 0x143, 0xC, 0xF, False), (8, 0x101, 0xF, 0x5, False),
], ids=["quad_perm_b1", "quad_perm_4e", "row_half_mirror", "row_mirror", "row_shr1_bound", "row_shr1_old",
        "row_bcast15", "row_bcast31", "row_shl1_bank_mask"])
def test_dpp_moves_follow_the_isa_lane_rules(kernels, which, ctrl, row_mask, bank_mask, bound_ctrl):
    out = np.zeros(64, np.int32)
    rc, error, undefined = kernels.call("run_dpp", which, out, -5)
    assert (rc, error, undefined) == (0, None, 0)
    assert out.tolist() == _dpp_expected(ctrl, row_mask, bank_mask, bound_ctrl, -5)


def test_reads_of_lanes_that_returned_are_counted(kernels):
    out = np.full(64, -9, np.int32)
    rc, error, undefined = kernels.call("run_early_exit", out, 4)
    assert (rc, error) == (0, None)
    assert undefined == 4  # lanes 0-3 read lanes 4-7 (lane ^ 4), which had returned
    out = np.full(64, -9, np.int32)
    rc, error, undefined = kernels.call("run_early_exit", out, 64)
    assert (rc, error, undefined) == (0, None, 0)
    assert out.tolist() == [(lane ^ 4) * 3 for lane in range(64)]


def test_an_instruction_not_emulated_stops_the_launch_naming_it(kernels):
    rc, error, _ = kernels.call("run_unemulated", np.zeros(1, np.float32))
    assert rc != 0 and error == "instruction not emulated: v_exp_f32"


def test_a_builtin_not_emulated_stops_the_launch_naming_it(kernels):
    rc, error, _ = kernels.call("run_poisoned", np.zeros(1, np.int32))
    assert rc != 0 and error == "builtin not emulated: __builtin_amdgcn_permlanex16"


def test_syncthreads_and_shared_memory_make_a_block_reduction(kernels):
    values = np.arange(4 * 256, dtype=np.int32) * 7 - 3000
    sums = np.zeros(4, np.int32)
    rc, error, undefined = kernels.call("run_block_sum", values, sums, 4)
    assert (rc, error, undefined) == (0, None, 0)
    assert sums.tolist() == values.reshape(4, 256).sum(axis=1).tolist()


def test_a_second_build_of_the_same_sources_comes_from_the_cache(kernels):
    unit = build.Unit(HERE, ("wave_kernels.cu",), "wave_kernels.cu", (".",))
    again = build.build(unit, kernels.built.arch, COMPILER)
    assert again.key == kernels.built.key and again.seconds == 0.0
