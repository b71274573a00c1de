"""The Triton writer under the CPU interpreter: an exact byte oracle, or refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fp8check.core import fp8
from fp8check.triton_cpu import interpreter as triton_exact, known_answers
from fp8check.producers import registry as producers
from fp8check.core.cache import CacheBuffer, guard_bytes, poison
from fp8check.cli import main
from fp8check.run.compare import compare
from fp8check.core.inputs import Inputs, SlotPattern, generate
from fp8check.core.spec import CacheSpec, FP8Format, Layout, ScaleFormat
from fp8check.run.table import seed_table

CPU = torch.device("cpu")


def all_finite_bf16() -> torch.Tensor:
    bits = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    return bits[torch.isfinite(bits)].float()


def into_fp8_range(x: torch.Tensor) -> torch.Tensor:
    """Spread every bf16 pattern's exponent over [2^-12, 2^9): subnormals, normals, ties, overflow."""
    mantissa, exponent = torch.frexp(x)
    return torch.ldexp(mantissa, (exponent % 21 - 11).float())


def interpreter_convert(x: torch.Tensor, fmt: FP8Format) -> tuple[torch.Tensor, torch.Tensor]:
    """(bytes, the bytes read back as fp32) of a @triton.jit kernel run on CPU tensors."""
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(src_ptr, dst_ptr, back_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(dst_ptr.dtype.element_ty), mask=mask)
        tl.store(back_ptr + offs, tl.load(dst_ptr + offs, mask=mask).to(tl.float32), mask=mask)

    out = torch.zeros(x.numel(), dtype=torch.uint8)
    back = torch.zeros(x.numel(), dtype=torch.float32)
    block = 1 << 14
    with triton_exact.cpu_kernels():
        kernel[((x.numel() + block - 1) // block,)](x, out.view(fmt.torch_dtype()), back, x.numel(), BLOCK=block)
    return out, back


@pytest.mark.parametrize("fmt", list(FP8Format))
@pytest.mark.parametrize("spread", [False, True], ids=["as-is", "scaled-into-range"])
def test_interpreter_conversion_equals_exact_encoder_on_every_finite_bf16(fmt, spread):
    x = all_finite_bf16()
    if spread:
        x = into_fp8_range(x)
    got, back = interpreter_convert(x, fmt)
    expected = fp8.encode(x, fmt)
    assert torch.equal(got, expected), f"{int((got != expected).sum())} conversions differ"
    # read back in the same format: the format's own value of each byte (torch's decoding, not fp8.decode)
    values = expected.view(fmt.torch_dtype()).float()
    assert ((back == values) | (back.isnan() & values.isnan())).all(), "bytes read back as other values"


def test_known_answer_check_passes_on_the_installed_triton():
    for fmt in FP8Format:
        ok, reason = known_answers.check(fmt)
        assert ok, reason


@pytest.fixture
def stock_interpreter_conversion(monkeypatch):
    """Triton's own (inexact) float -> fp8 conversion inside the CPU scope, as on a Triton where the
    exact one failed (a stand-in: fp8check's scope told to keep the stock conversion)."""
    monkeypatch.setattr(triton_exact, "_exact_fp_to_fp", lambda tl, handle_cls, original: original)
    known_answers.check.cache_clear()
    yield
    known_answers.check.cache_clear()


def test_known_answer_check_refuses_the_stock_interpreter_conversion(stock_interpreter_conversion):
    ok, reason = known_answers.check(FP8Format.E4M3FN)
    assert not ok
    assert "not exact" in reason


def test_stock_interpreter_would_report_false_mismatches(stock_interpreter_conversion):
    # Why the patch exists (SPEC.md section 6): the stock conversion garbles a few hundred bytes per block.
    spec = CacheSpec(num_blocks=2, block_size=64, head_dim=128)
    data = generate(spec, seed=0)
    buffer = CacheBuffer.allocate(spec, CPU)
    from fp8check.producers.triton import fixed_writer

    fixed_writer(data.k, buffer.cache, data.slot_mapping, 128, "ue8m0")  # enters the scope itself
    reference = producers.run(producers.resolve("reference"), spec, data, CPU)
    assert int((buffer.flat != reference.flat).sum()) > 100


def test_cli_refuses_cpu_triton_when_the_conversion_is_not_exact(stock_interpreter_conversion, capsys):
    assert main(["compare", "--candidate", "triton", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "its FP8 conversion is not exact" in err[0]  # refused at resolve or at launch, as the numpy in use decides
    assert "producer 'triton' is unavailable" in err[0] or "refusing to run a Triton writer on the CPU" in err[0]


def test_unknown_triton_version_is_refused(monkeypatch):
    import triton

    monkeypatch.setattr(triton, "__version__", "9.1.0")
    known_answers.check.cache_clear()
    try:
        ok, reason = known_answers.check(FP8Format.E4M3FN)
    finally:
        known_answers.check.cache_clear()
    assert not ok and "Triton 9.1.0" in reason


@pytest.mark.parametrize("block_size", [1, 16, 64])
@pytest.mark.parametrize("slots", [SlotPattern.SEQUENTIAL, SlotPattern.SHUFFLED, SlotPattern.PADDED])
def test_fixed_triton_equals_reference_on_fn_ue8m0(block_size, slots):
    spec = CacheSpec(num_blocks=256 // block_size, block_size=block_size, head_dim=128)
    result = compare(spec, baseline=producers.resolve("reference"), candidate=producers.resolve("triton"),
                     inputs=generate(spec, seed=block_size, slots=slots), device=CPU)
    assert result.diff.diff_bytes == 0


@pytest.mark.parametrize("block_size", [1, 16, 64])
def test_seed_table_buggy_column_differs_fixed_column_zero(block_size):
    spec = CacheSpec(num_blocks=max(3, 128 // block_size), block_size=block_size, head_dim=128)
    table = seed_table(spec, baseline=producers.resolve("reference"), buggy=producers.resolve("triton-buggy"),
                       fixed=producers.resolve("triton"), inputs=generate(spec, seed=0), device=CPU)
    assert table.passed
    for b in table.buggy.diff.all_rows():
        assert b.value_diff >= 0.95 * b.value_total
        assert b.scale_diff == 0  # the bug is in the value region only
    assert all(b.diff == 0 for b in table.fixed.diff.all_rows())


def test_buggy_bytes_are_the_interpreters_integer_conversion():
    # Independent of the diagnosis code: the buggy value bytes are x / s converted to uint8 as compiled
    # Triton on NVIDIA converts (docs/NUMERICS.md): toward zero, saturated to 16 bits (negatives become
    # 0), NaN to 0, and the store keeps the low byte.
    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=128, layout=Layout.LINEAR)
    data = generate(spec, seed=3)
    buggy = producers.run(producers.resolve("triton-buggy"), spec, data, CPU)
    reference = producers.run(producers.resolve("reference"), spec, data, CPU)
    scales = reference.flat[:, spec.value_bytes:spec.value_bytes + spec.scale_bytes].contiguous()
    scales = scales.view(torch.float32).reshape(-1, 1)
    quotient = (data.k.float() / scales).numpy()
    saturated = np.clip(np.trunc(np.nan_to_num(quotient.astype(np.float64), nan=0.0)), 0, 65535)
    expected = saturated.astype(np.int64).astype(np.uint8)
    got = buggy.flat[:, :spec.value_bytes].reshape(-1, 128).numpy()
    assert np.array_equal(got, expected)


def test_padded_tokens_and_unmapped_slots_stay_untouched():
    spec = CacheSpec(num_blocks=4, block_size=16, head_dim=128)
    k = torch.randn(40, 128).to(torch.bfloat16)
    slot_mapping = torch.full((40,), -1, dtype=torch.int64)
    slot_mapping[::2] = torch.arange(0, 40, 2) + 7  # slots 7, 9, ..., 45: others never mapped
    data = Inputs(k, slot_mapping, "hand-made padded slots")
    written = producers.run(producers.resolve("triton"), spec, data, CPU)
    fresh = poison(written.buffer.numel())
    mapped = torch.zeros(written.buffer.numel(), dtype=torch.bool)
    for slot in slot_mapping[slot_mapping >= 0].tolist():
        block, t = divmod(slot, spec.block_size)
        base = guard_bytes(spec) + block * spec.block_bytes
        for dim in range(spec.head_dim):
            mapped[base + spec.value_offset(t, dim)] = True
        first = base + spec.scale_offset(t, 0)
        mapped[first:first + 4] = True
    assert torch.equal(written.buffer[~mapped], fresh[~mapped])
    reference = producers.run(producers.resolve("reference"), spec, data, CPU)
    assert torch.equal(written.buffer, reference.buffer)


def test_fp32_scales_run_and_fnuz_differs_from_aiter_divisor():
    spec = CacheSpec(num_blocks=2, block_size=64, head_dim=128, fp8=FP8Format.E4M3FNUZ)
    data = generate(spec, seed=0)
    vs_aiter = compare(spec, baseline=producers.resolve("reference"), candidate=producers.resolve("triton"),
                       inputs=data, device=CPU)
    vs_vllm = compare(spec, baseline=producers.resolve("reference-vllm"), candidate=producers.resolve("triton"),
                      inputs=data, device=CPU)
    assert vs_aiter.diff.diff_bytes > 0  # 240 vs 224
    assert vs_vllm.diff.diff_bytes == 0  # same divisor, same division
    spec32 = spec.replace(fp8=FP8Format.E4M3FN, scale_fmt=ScaleFormat.FP32)
    r = compare(spec32, baseline=producers.resolve("reference-vllm"), candidate=producers.resolve("triton"),
                inputs=generate(spec32, seed=1), device=CPU)
    assert r.diff.diff_bytes == 0  # IEEE division on both sides under the interpreter


def test_triton_refuses_qbs_smaller_than_head_dim(capsys):
    assert main(["compare", "--qbs", "64"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--qbs 128" in err[0]


def test_table_command_exit_and_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one line per header: the column titles are checked below
    out = tmp_path / "table.json"
    assert main(["table", "--block", "64", "--head-dim", "128", "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["passed"] is True
    assert payload["baseline_emulated"] is True
    assert payload["fixed"]["value_diff"] == [0, 0, 0]
    assert all(v >= 0.95 * 8192 for v in payload["buggy"]["value_diff"])
    out = capsys.readouterr().out
    assert "BUGGY (uint8) vs C++ + shuffle_weight [emulated]" in out
    # The buggy column's cause is named, with every differing byte, and the hint says what to do.
    buggy_bytes = sum(payload["buggy"]["value_diff"]) + sum(payload["buggy"]["scale_diff"])
    assert [(c["category"], c["bytes"]) for c in payload["buggy"]["diagnosis"]] == [("integer-cast", buggy_bytes)]
    assert "torch.float8_e4m3fn" in payload["buggy"]["diagnosis"][0]["hint"]
    assert "torch.float8_e4m3fn" in out
    assert payload["fixed"]["diagnosis"] == []


def test_table_reads_the_seed_config(tmp_path):
    out = tmp_path / "table.json"
    assert main(["table", "--config", "configs/seed-table.toml", "--num-blocks", "2", "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["spec"]["num_blocks"] == 2  # the command line wins over the file
    assert payload["spec"]["block_size"] == 64


def test_table_exits_1_when_the_fixed_column_differs():
    # With fnuz the fixed Triton writer (DIV 224) and aiter's op (DIV 240) disagree: the table must fail.
    assert main(["table", "--fp8", "e4m3fnuz", "--device", "cpu"]) == 1


@pytest.mark.parametrize("options, named", [
    (("--layers", "2"), "--layers 2"),
    (("--scale-fmt", "ue8m0x4"), "--scale-fmt ue8m0x4"),
    (("--layout", "interleaved", "--scale-fmt", "ue8m0x4"), "--layout interleaved --scale-fmt ue8m0x4"),
])
def test_a_cache_the_triton_writer_cannot_write_is_refused_naming_only_that(capsys, options, named):
    # one line naming the options it cannot write (never those it can), not a torch error from inside it
    code = main(["compare", "--device", "cpu", "--baseline", "reference", "--candidate", "triton", *options])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == ("fp8check: error: fp8check's Triton writer (vLLM's ROCm semantics) writes one planar layer with"
                   f" fp32 scale words; it cannot write {named}\n")
