"""Contract tests of the real-writer adapters (aiter, vllm-triton, vllm-cuda) against stand-ins.

The stand-ins (tests/standins/) implement each library's documented Python API with the reference
numerics; an adapter that drives the API correctly gives bytes identical to the matching reference
emulation, guards and unwritten bytes included. No real aiter or vLLM is needed (or used).
"""

from __future__ import annotations

import json
import sys

import pytest
import torch
from standins import aiter_standin, install, vllm_standin

from fp8check.producers import registry as producers
from fp8check.producers.adapters import aiter, vllm_cuda, vllm_triton
from fp8check.producers.adapters.platform import Backend, Platform
from fp8check.cli import main
from fp8check.core.inputs import Inputs, SlotPattern, generate
from fp8check.core.errors import ProducerError
from fp8check.core.spec import CacheSpec, FP8Format, Layout, ScaleFormat

CPU = torch.device("cpu")
# Stand-in ops run on the CPU, so the platforms they are tested on say so in torch_device.
MI300 = Platform(Backend.ROCM, True, "stand-in MI300X", "gfx942:sramecc+:xnack-", "cpu")
MI355 = Platform(Backend.ROCM, True, "stand-in MI355X", "gfx950:sramecc+:xnack-", "cpu")
H200 = Platform(Backend.CUDA, True, "stand-in H200", "sm_90", "cpu")
NO_GPU = Platform(Backend.CPU, False, "cpu", "cpu", "cpu")


pytestmark = pytest.mark.usefixtures("no_real_libraries")  # tests/conftest.py


def platform_for(fmt: FP8Format) -> Platform:
    return MI300 if fmt is FP8Format.E4M3FNUZ else MI355


def run_bytes(producer, spec: CacheSpec, inputs: Inputs) -> torch.Tensor:
    """The whole poisoned allocation (guards included) after the producer wrote it."""
    return producers.run(producer, spec, inputs, CPU).buffer


def partial_inputs() -> Inputs:
    """Four tokens in blocks 0 and 1 of CacheSpec(), padding mixed in: most bytes stay unwritten."""
    slots = torch.tensor([3, -1, 17, 104, -1, 0], dtype=torch.int64)
    return Inputs(generate(CacheSpec(), seed=7).k[: slots.numel()], slots, "partial blocks")


SPECS = [
    pytest.param(CacheSpec(), id="block64-fn-ue8m0"),
    pytest.param(CacheSpec(block_size=16, fp8=FP8Format.E4M3FNUZ, scale_fmt=ScaleFormat.FP32), id="block16-fnuz-fp32"),
    pytest.param(CacheSpec(block_size=32, head_dim=256, quant_block_size=64), id="qbs64"),
    pytest.param(CacheSpec(block_size=1, num_blocks=40), id="block1-linear"),
    pytest.param(CacheSpec(layout=Layout.LINEAR), id="block64-linear"),
]
SLOTS = [SlotPattern.SEQUENTIAL, SlotPattern.PADDED, SlotPattern.SPARSE]


# ---- aiter: both API forms give the reference's bytes -------------------------------------------------


@pytest.mark.parametrize("preshuffle", [True, False], ids=["preshuffle-keyword", "row-major+shuffle_weight"])
@pytest.mark.parametrize("slots", SLOTS, ids=lambda s: s.value)
@pytest.mark.parametrize("spec", SPECS)
def test_aiter_forms_write_the_reference_bytes(monkeypatch, preshuffle, slots, spec):
    install(monkeypatch, aiter_standin.modules(preshuffle=preshuffle, fp8=spec.fp8))
    api = aiter.load_api()
    assert api.form is (aiter.Form.PRESHUFFLE if preshuffle else aiter.Form.SHUFFLE_AFTER)
    inputs = generate(spec, seed=3, slots=slots)
    got = run_bytes(aiter.make_producer(api, platform_for(spec.fp8)), spec, inputs)
    assert torch.equal(got, run_bytes(producers.resolve("reference"), spec, inputs))


@pytest.mark.parametrize("preshuffle", [True, False], ids=["preshuffle-keyword", "row-major+shuffle_weight"])
def test_aiter_partly_written_blocks_keep_their_unwritten_bytes(monkeypatch, preshuffle):
    # shuffle_weight permutes a whole block; bytes of tokens nobody wrote must not move with it.
    install(monkeypatch, aiter_standin.modules(preshuffle=preshuffle))
    spec = CacheSpec()
    inputs = partial_inputs()
    got = run_bytes(aiter.make_producer(aiter.load_api(), MI355), spec, inputs)
    assert torch.equal(got, run_bytes(producers.resolve("reference"), spec, inputs))


def test_standin_shuffle_weight_is_the_spec_shuffle_layout():
    spec = CacheSpec(block_size=32, head_dim=64, quant_block_size=64)
    rows = torch.arange(spec.value_bytes, dtype=torch.int64).view(spec.block_size, spec.head_dim)
    shuffled = aiter_standin.shuffle_weight((rows % 251).to(torch.uint8)).view(-1)
    expected = torch.empty(spec.value_bytes, dtype=torch.uint8)
    expected[spec.value_index().view(-1)] = (rows % 251).to(torch.uint8).view(-1)
    assert torch.equal(shuffled, expected)


def test_aiter_row_major_form_needs_head_dim_multiple_of_32(monkeypatch):
    install(monkeypatch, aiter_standin.modules(preshuffle=False))
    spec = CacheSpec(head_dim=48, quant_block_size=48)
    producer = aiter.make_producer(aiter.load_api(), MI355)
    with pytest.raises(ProducerError, match=r"needs head_dim % 32 == 0, got 48"):
        producers.run(producer, spec, generate(spec, seed=0), CPU)


def test_aiter_preshuffle_form_takes_head_dim_48(monkeypatch):
    install(monkeypatch, aiter_standin.modules(preshuffle=True))
    spec = CacheSpec(head_dim=48, quant_block_size=48)
    inputs = generate(spec, seed=0)
    got = run_bytes(aiter.make_producer(aiter.load_api(), MI355), spec, inputs)
    assert torch.equal(got, run_bytes(producers.resolve("reference"), spec, inputs))


def test_aiter_refuses_a_format_its_gpu_does_not_write(monkeypatch):
    install(monkeypatch, aiter_standin.modules(preshuffle=True, fp8=FP8Format.E4M3FNUZ))
    producer = aiter.make_producer(aiter.load_api(), MI300)
    with pytest.raises(ProducerError, match=r"writes e4m3fnuz on gfx942:sramecc\+:xnack-, not e4m3fn: run with --fp8 e4m3fnuz"):
        producers.run(producer, CacheSpec(), generate(CacheSpec(), seed=0), CPU)


def test_aiter_refuses_the_cpu_device(monkeypatch):
    install(monkeypatch, aiter_standin.modules(preshuffle=True))
    rocm = Platform(Backend.ROCM, True, "MI355X", "gfx950", "cuda")
    with pytest.raises(ProducerError, match="runs on the ROCm GPU, not on cpu: use --device cuda"):
        producers.run(aiter.make_producer(aiter.load_api(), rocm), CacheSpec(), generate(CacheSpec(), seed=0), CPU)


# ---- aiter: availability and its reasons ---------------------------------------------------------


def test_aiter_available_on_rocm_names_form_arch_and_format(monkeypatch):
    install(monkeypatch, aiter_standin.modules(preshuffle=False, fp8=FP8Format.E4M3FNUZ))
    ok, reason = aiter.availability(MI300)
    assert ok
    assert reason == (
        "aiter 0.0.0+standin (row-major + shuffle_weight) on gfx942:sramecc+:xnack-: writes e4m3fnuz"
        " (e4m3fnuz on gfx94x, e4m3fn elsewhere)"
    )


@pytest.mark.parametrize("platform, why", [
    (NO_GPU, f"it needs a ROCm device, and this torch {torch.__version__} is a cpu build (torch.version.hip is None)"),
    (H200, f"it needs a ROCm device, and this torch {torch.__version__} is a cuda build (torch.version.hip is None)"),
    (Platform(Backend.ROCM, False, "cpu", "cpu", "cpu"),
     "it needs a ROCm device, and torch sees none (torch.cuda.is_available() is False)"),
], ids=["cpu-build", "cuda-build", "rocm-without-gpu"])
def test_aiter_installed_but_not_on_a_rocm_device(monkeypatch, platform, why):
    install(monkeypatch, aiter_standin.modules(preshuffle=True))
    assert aiter.availability(platform) == (False, f"aiter 0.0.0+standin found, but {why}")


def test_aiter_not_installed():
    assert aiter.availability(MI300) == (
        False, "aiter is not installed (ROCm's kernel library, pip package amd-aiter; needs a ROCm GPU)"
    )


def test_lookalike_pypi_aiter_is_named_as_such(monkeypatch):
    install(monkeypatch, aiter_standin.lookalike())
    ok, reason = aiter.availability(MI300)
    assert not ok
    assert "has no aiter.ops: it is the unrelated PyPI package 'aiter' (asynchronous iterator helpers)" in reason
    assert "not ROCm's aiter kernel library (pip package amd-aiter)" in reason


def test_aiter_whose_import_crashes_reports_the_cause(monkeypatch, tmp_path):
    (tmp_path / "aiter").mkdir()
    (tmp_path / "aiter" / "__init__.py").write_text(
        "raise OSError('libamdhip64.so: cannot open shared object file')\n"
    )
    monkeypatch.delitem(sys.modules, "aiter")
    monkeypatch.syspath_prepend(str(tmp_path))
    ok, reason = aiter.availability(MI300)
    assert (ok, reason) == (False, "import aiter failed: OSError: libamdhip64.so: cannot open shared object file")


def test_aiter_without_the_indexer_op(monkeypatch):
    modules = aiter_standin.modules(preshuffle=True)
    del modules["aiter.ops.cache"].indexer_k_quant_and_cache
    install(monkeypatch, modules)
    ok, reason = aiter.availability(MI300)
    assert not ok and "has no aiter.ops.cache.indexer_k_quant_and_cache" in reason


# ---- the registry: resolve, auto, and the CLI ------------------------------------------------------


def test_resolve_unavailable_aiter_is_a_one_line_producer_error(monkeypatch):
    install(monkeypatch, aiter_standin.lookalike())
    with pytest.raises(ProducerError) as info:
        producers.resolve("aiter")
    message = str(info.value)
    assert message.startswith("producer 'aiter' is unavailable: the installed 'aiter'")
    assert "\n" not in message


def test_cli_baseline_aiter_unavailable_exits_2_with_the_reason(monkeypatch, capsys):
    install(monkeypatch, aiter_standin.lookalike())
    code = main(["compare", "--baseline", "aiter", "--candidate", "reference"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("fp8check: error: producer 'aiter' is unavailable:")
    assert "unrelated PyPI package 'aiter'" in err


def test_auto_falls_back_to_the_emulation_and_says_so(monkeypatch, capsys, tmp_path):
    path = tmp_path / "auto.json"
    code = main(["compare", "--candidate", "reference", "--json", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(path.read_text())
    assert (payload["baseline"], payload["baseline_emulated"]) == ("reference", True)
    assert "reference (PyTorch emulation) vs reference" in " ".join(out.split())
    assert "auto: aiter unavailable: aiter is not installed" in producers.resolve("auto").description


def test_auto_runs_aiter_where_it_can(monkeypatch, capsys, tmp_path):
    install(monkeypatch, aiter_standin.modules(preshuffle=False))
    monkeypatch.setattr(aiter, "probe", lambda: MI355)  # a ROCm GPU whose tensors live on the CPU
    path = tmp_path / "auto.json"
    code = main(["compare", "--candidate", "reference", "--device", "cpu", "--json", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(path.read_text())
    assert (payload["baseline"], payload["baseline_emulated"]) == ("aiter", False)
    assert payload["identical"] is True
    assert "aiter vs reference (PyTorch emulation)" in " ".join(out.split())


# ---- vLLM's Triton writer ----------------------------------------------------------------------


@pytest.mark.parametrize("slots", SLOTS, ids=lambda s: s.value)
@pytest.mark.parametrize("spec", [
    pytest.param(CacheSpec(), id="block64-fn"),
    pytest.param(CacheSpec(block_size=16, fp8=FP8Format.E4M3FNUZ, scale_fmt=ScaleFormat.FP32), id="block16-fnuz-fp32"),
    pytest.param(CacheSpec(block_size=1, num_blocks=40), id="block1-linear"),
])
def test_vllm_triton_writes_the_reference_vllm_bytes(monkeypatch, slots, spec):
    install(monkeypatch, vllm_standin.triton_modules(fp8=spec.fp8))
    found = vllm_triton.load()
    assert found.where == f"{vllm_standin.TRITON_MODULE}.indexer_k_quant_and_cache_triton"
    inputs = generate(spec, seed=5, slots=slots)
    platform = MI300 if spec.fp8 is FP8Format.E4M3FNUZ else H200
    got = run_bytes(vllm_triton.make_producer(found, platform), spec, inputs)
    assert torch.equal(got, run_bytes(producers.resolve("reference-vllm"), spec, inputs))


def test_vllm_triton_found_in_the_older_module_path(monkeypatch):
    install(monkeypatch, vllm_standin.triton_modules(module=vllm_standin.OLD_TRITON_MODULE))
    assert vllm_triton.load().where == f"{vllm_standin.OLD_TRITON_MODULE}.indexer_k_quant_and_cache_triton"
    assert vllm_triton.availability(H200) == (
        True, f"vLLM 0.0.0+standin: {vllm_standin.OLD_TRITON_MODULE}.indexer_k_quant_and_cache_triton on sm_90 (e4m3fn)"
    )


def test_vllm_triton_refuses_a_layout_vllm_does_not_write(monkeypatch):
    install(monkeypatch, vllm_standin.triton_modules())
    producer = vllm_triton.make_producer(vllm_triton.load(), H200)
    spec = CacheSpec(layout=Layout.LINEAR)
    with pytest.raises(ProducerError, match="writes the shuffle layout for block_size 64, not linear"):
        producers.run(producer, spec, generate(spec, seed=0), CPU)


def test_vllm_triton_refuses_a_format_vllm_does_not_pick(monkeypatch):
    install(monkeypatch, vllm_standin.triton_modules())
    producer = vllm_triton.make_producer(vllm_triton.load(), H200)
    spec = CacheSpec(fp8=FP8Format.E4M3FNUZ)
    with pytest.raises(ProducerError, match="vLLM writes e4m3fn on sm_90, not e4m3fnuz: run with --fp8 e4m3fn"):
        producers.run(producer, spec, generate(spec, seed=0), CPU)


def test_vllm_triton_reasons():
    assert vllm_triton.availability(H200) == (False, "vLLM is not installed")


def test_vllm_without_the_triton_writer(monkeypatch):
    install(monkeypatch, vllm_standin.triton_modules(with_function=False))
    ok, reason = vllm_triton.availability(H200)
    assert not ok
    assert reason == (
        "vLLM 0.0.0+standin has no usable indexer_k_quant_and_cache_triton:"
        f" {vllm_standin.TRITON_MODULE} has no indexer_k_quant_and_cache_triton; no {vllm_standin.OLD_TRITON_MODULE}"
    )


def test_vllm_triton_needs_a_gpu(monkeypatch):
    install(monkeypatch, vllm_standin.triton_modules())
    assert vllm_triton.availability(NO_GPU) == (
        False, "vLLM 0.0.0+standin found, but it runs on a GPU, and torch sees none (torch.cuda.is_available() is False)"
    )


# ---- vLLM's C++ op -------------------------------------------------------------------------------


@pytest.fixture
def vllm_c(monkeypatch):
    """Install the stand-in vllm._C and its op as torch.ops._C_cache_ops; returns the builder."""

    def build(fmt: FP8Format = FP8Format.E4M3FN):
        found, namespace = vllm_standin.cuda_modules(fp8=fmt)
        install(monkeypatch, found)
        monkeypatch.setattr(torch.ops, "_C_cache_ops", namespace, raising=False)
        return vllm_cuda.load()

    return build


@pytest.mark.parametrize("slots", SLOTS, ids=lambda s: s.value)
@pytest.mark.parametrize("spec", [
    pytest.param(CacheSpec(layout=Layout.LINEAR), id="block64-fn-ue8m0"),
    pytest.param(CacheSpec(layout=Layout.LINEAR, scale_fmt=ScaleFormat.FP32), id="block64-fn-fp32"),
    pytest.param(CacheSpec(block_size=1, num_blocks=40), id="block1"),
    pytest.param(CacheSpec(block_size=16, layout=Layout.LINEAR, fp8=FP8Format.E4M3FNUZ), id="block16-fnuz"),
])
def test_vllm_cuda_writes_the_reference_vllm_bytes(vllm_c, slots, spec):
    found = vllm_c(spec.fp8)
    inputs = generate(spec, seed=11, slots=slots)
    platform = MI300 if spec.fp8 is FP8Format.E4M3FNUZ else H200
    got = run_bytes(vllm_cuda.make_producer(found, platform), spec, inputs)
    assert torch.equal(got, run_bytes(producers.resolve("reference-vllm"), spec, inputs))


def test_vllm_cuda_is_row_major_only(vllm_c):
    producer = vllm_cuda.make_producer(vllm_c(), H200)
    with pytest.raises(ProducerError, match="writes row-major only: run with --layout linear"):
        producers.run(producer, CacheSpec(), generate(CacheSpec(), seed=0), CPU)


def test_vllm_cuda_available_with_its_extension(vllm_c):
    vllm_c()
    assert vllm_cuda.availability(H200) == (
        True, "vLLM 0.0.0+standin: torch.ops._C_cache_ops.indexer_k_quant_and_cache on sm_90"
    )


def test_vllm_without_its_compiled_extension(monkeypatch):
    found, _ = vllm_standin.cuda_modules()
    del found["vllm._C"]
    install(monkeypatch, found)
    monkeypatch.setitem(sys.modules, "vllm._C", None)
    assert vllm_cuda.availability(H200) == (
        False, "vLLM 0.0.0+standin has no compiled extension vllm._C (a CPU-only or source tree?)"
    )


def test_vllm_extension_without_the_op(monkeypatch):
    found, _ = vllm_standin.cuda_modules()
    install(monkeypatch, found)
    monkeypatch.setattr(torch.ops, "_C_cache_ops", type("Empty", (), {})(), raising=False)
    ok, reason = vllm_cuda.availability(H200)
    assert not ok
    assert "vllm._C registers no torch.ops._C_cache_ops.indexer_k_quant_and_cache" in reason


# ---- every adapter answers availability without raising, whatever is installed --------------------


@pytest.mark.parametrize("name", ["aiter", "vllm-triton", "vllm-cuda"])
def test_registry_availability_is_one_line(name):
    ok, reason = producers.available(name)
    assert ok is False and reason and "\n" not in reason
