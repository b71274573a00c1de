"""CUDA sources built with nvcc (cuda_src/, vllm-src:, deepgemm-src:), checked without a GPU: what is cut
out of a released source, what the build is keyed on, the command line it states, and the reason a case
is skipped where nvcc, a GPU or the source is missing."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import torch

from fp8check.code.names import parse
from fp8check.core.errors import NotRunnableHere, ProducerError
from fp8check.core.spec import CacheSpec, FP8Format, Layout
from fp8check.cuda_src import build, extract, toolchain
from fp8check.producers import registry, vllm_src
from fp8check.producers.adapters import deepgemm_src
from fp8check.run import gate, gate_config

CONFIGS = Path(__file__).resolve().parents[1] / "fp8check" / "configs"

# A cache_kernels.cu shaped like vLLM's (its names, its dispatch string), written here for the test.
OP = '''#include "torch_utils.h"
#include "quantization/w8a8/fp8/nvidia/quant_utils.cuh"

#if defined(__gfx942__)
constexpr float kFp8ScaleDivisor = 224.f;
#else
constexpr float kFp8ScaleDivisor = 448.f;
#endif

namespace vllm {
template <typename scalar_t, typename cache_t, Fp8KVCacheDataType kv_dt>
__global__ void indexer_k_quant_and_cache_kernel(const scalar_t* k, cache_t* kv_cache, const int64_t* slot_mapping,
    const int head_dim, const int quant_block_size, const int cache_block_size, const int64_t cache_block_stride,
    const bool use_ue8m0, const bool use_mx_scale) {
  // a brace in a comment: {
  const char* why = "}";
  if (use_ue8m0) { kv_cache[0] = 1; }
}
__global__ void other_kernel() {}
}  // namespace vllm

void indexer_k_quant_and_cache(torch::stable::Tensor& k, torch::stable::Tensor& kv_cache,
                               torch::stable::Tensor& slot_mapping, int64_t quant_block_size,
                               const std::string& scale_fmt) {
  bool use_mx_scale = scale_fmt == "mxfp8";
  bool use_ue8m0 = use_mx_scale || scale_fmt == "ue8m0";
  constexpr int vec_size = 4;
  dim3 grid(num_tokens, (head_dim + quant_block_size * vec_size - 1) /
                            (quant_block_size * vec_size));
  dim3 block(32, vec_size);
  static const std::string kv_cache_dtype = "fp8_e4m3";
  DISPATCH_BY_KV_CACHE_DTYPE(k.scalar_type(), kv_cache_dtype, CALL_INDEXER_K_QUANT_AND_CACHE);
}
'''
HEADERS = {
    "quantization/w8a8/fp8/nvidia/quant_utils.cuh": '#include "core/vec_dtypes/vec_dtypes.h"\n#include <float.h>\n',
    "core/vec_dtypes/vec_dtypes.h": '#include "dtype_fp8.cuh"\n#include "hip_only.h"\n',
    "core/vec_dtypes/dtype_fp8.cuh": "#include <cuda_fp8.h>\n",
}
SM90 = toolchain.Toolchain(Path("/usr/local/cuda/bin/nvcc"), "13.0.88", "sm_90")


def _tree(root: Path) -> Path:
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "cache_kernels.cu").write_text(OP)
    for relative, text in HEADERS.items():
        (root / "csrc" / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / "csrc" / relative).write_text(text)
    (root / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: vllm\nVersion: 0.33.0\n")
    return root


def _sdist(tmp_path: Path) -> Path:
    tree = _tree(tmp_path / "vllm-0.33.0")
    archive = tmp_path / "vllm-0.33.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="vllm-0.33.0")
        tar.addfile(tarfile.TarInfo("vllm-0.33.0/setup.py"), io.BytesIO(b""))
    return archive


def test_the_kernel_is_cut_out_whole_with_its_template_line():
    kernel = extract.function(OP, "indexer_k_quant_and_cache_kernel", kernel=True, what="op")
    assert kernel.startswith("template <typename scalar_t, typename cache_t, Fp8KVCacheDataType kv_dt>\n__global__")
    assert kernel.endswith('  if (use_ue8m0) { kv_cache[0] = 1; }\n}')  # braces in comments and strings skipped
    assert "other_kernel" not in kernel


def test_the_arch_divisor_block_and_host_statements_are_the_sources_own():
    assert extract.block_defining(OP, "kFp8ScaleDivisor", "op") == (
        "#if defined(__gfx942__)\nconstexpr float kFp8ScaleDivisor = 224.f;\n#else\n"
        "constexpr float kFp8ScaleDivisor = 448.f;\n#endif")
    host = extract.function(OP, "indexer_k_quant_and_cache", kernel=False, what="op")
    assert extract.statement(host, r"dim3\s+grid\b", "op") == (
        "dim3 grid(num_tokens, (head_dim + quant_block_size * vec_size - 1) /\n"
        "                            (quant_block_size * vec_size));")
    with pytest.raises(ProducerError, match="op: no __global__ function missing_kernel"):
        extract.function(OP, "missing_kernel", kernel=True, what="op")


def test_only_the_project_headers_the_unit_includes_are_taken(tmp_path):
    csrc = _tree(tmp_path / "v") / "csrc"
    (csrc / "unrelated.h").write_text("")
    assert extract.headers(csrc, "quantization/w8a8/fp8/nvidia/quant_utils.cuh") == (
        "core/vec_dtypes/dtype_fp8.cuh", "core/vec_dtypes/vec_dtypes.h", "quantization/w8a8/fp8/nvidia/quant_utils.cuh")


def test_an_sdist_is_unpacked_once_and_named_by_version_and_hashes(tmp_path, monkeypatch):
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    archive = _sdist(tmp_path)
    source = vllm_src.locate(str(archive))
    assert source.version == "0.33.0" and len(source.archive_sha256) == 64
    assert source.root.is_relative_to(tmp_path / "cache") and not (source.root / "setup.py").exists()
    assert vllm_src.locate(str(archive)).root == source.root


def test_an_unpacked_copy_is_staged_beside_its_cache_entry(tmp_path, monkeypatch):
    from fp8check.code.released import unpacked_once

    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    staged = []

    def extract(staging):
        staged.append(staging)
        (staging / "kept").mkdir()
        (staging / "kept" / "DONE").write_text("")
        return staging / "kept"

    target = unpacked_once("sdist", "k1", "DONE", extract)
    assert (target / "DONE").exists() and staged[0].parent == target.parent  # one file system: the move holds
    assert not staged[0].exists() and unpacked_once("sdist", "k1", "DONE", extract) == target and len(staged) == 1


def test_the_unit_is_the_kernel_the_launch_geometry_and_fp8checks_binding(tmp_path):
    unit = vllm_src.unit(vllm_src.locate(str(_tree(tmp_path / "vllm-0.33.0"))))
    assert "constexpr float kFp8ScaleDivisor = 448.f;" in unit.kernel
    assert "dim3 block(32, vec_size);" in unit.kernel and 'bool use_mx_scale = scale_fmt == "mxfp8";' in unit.kernel
    assert "<__nv_bfloat16, uint8_t, vllm::Fp8KVCacheDataType::kFp8E4M3>" in unit.kernel
    assert "other_kernel" not in unit.kernel and "PYBIND11_MODULE" in unit.binding
    assert unit.files == ("core/vec_dtypes/dtype_fp8.cuh", "core/vec_dtypes/vec_dtypes.h",
                          "quantization/w8a8/fp8/nvidia/quant_utils.cuh")


def test_a_source_that_no_longer_dispatches_on_fp8_e4m3_is_refused(tmp_path):
    root = _tree(tmp_path / "v")
    (root / "csrc" / "cache_kernels.cu").write_text(OP.replace('"fp8_e4m3"', '"fp8_e5m2"'))
    with pytest.raises(ProducerError, match='no longer dispatches on "fp8_e4m3"'):
        vllm_src.unit(vllm_src.locate(str(root)))


def test_the_build_is_keyed_on_sources_compiler_and_arch(tmp_path):
    root = _tree(tmp_path / "v")
    unit = vllm_src.unit(vllm_src.locate(str(root)))
    key = build.key(unit, SM90)
    assert build.key(unit, SM90) == key
    assert build.key(unit, toolchain.Toolchain(SM90.nvcc, "13.1.0", "sm_90")) != key
    assert build.key(unit, toolchain.Toolchain(SM90.nvcc, "13.0.88", "sm_100")) != key
    (root / "csrc" / "core/vec_dtypes/dtype_fp8.cuh").write_text("#include <cuda_fp8.h>\n// changed\n")
    assert build.key(unit, SM90) != key


def test_the_command_line_builds_this_gpu_only_as_vllm_builds_the_file(tmp_path):
    unit = vllm_src.unit(vllm_src.locate(str(_tree(tmp_path / "v"))))
    line = build.command_line(unit, SM90)
    assert line.startswith("/usr/local/cuda/bin/nvcc -O3 -DENABLE_FP8 -U__CUDA_NO_HALF_OPERATORS__")
    assert "-U__CUDA_NO_BFLOAT16_CONVERSIONS__" in line and "--use_fast_math" not in line
    assert line.endswith(f"-gencode=arch=compute_90,code=sm_90 -I{tmp_path / 'v' / 'csrc'} vllm_indexer_k.cu")


@pytest.mark.parametrize("capability, arch", [((9, 0), "sm_90"), ((10, 0), "sm_100"), ((12, 0), "sm_120")])
def test_the_arch_comes_from_the_compute_capability(capability, arch):
    assert toolchain.arch_of(capability) == arch


def test_the_nvcc_version_is_read_from_its_release_line():
    text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
    assert toolchain.parse_version(text) == "13.0.88"
    assert toolchain.parse_version("no version here") is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="the skip reason of a machine without an NVIDIA GPU")
def test_without_nvcc_or_a_gpu_the_name_is_not_runnable_here():
    with pytest.raises(NotRunnableHere, match="a CUDA source build needs nvcc and an NVIDIA GPU: "):
        registry.resolve("vllm-src:.sources/vllm-0.33.0")
    with pytest.raises(NotRunnableHere, match="a CUDA source build needs nvcc and an NVIDIA GPU: "):
        registry.resolve_reader("deepgemm-src:.sources/DeepGEMM", spec=CacheSpec(layout=Layout.LINEAR))


def test_a_missing_source_is_not_runnable_here_with_how_to_fetch_it(monkeypatch, tmp_path):
    monkeypatch.setattr(toolchain, "find", lambda: (SM90, "nvcc 13.0.88 for sm_90"))
    with pytest.raises(NotRunnableHere, match=r"the vLLM source is not here \(pip download --no-deps"):
        vllm_src.require_here(parse(f"vllm-src:{tmp_path / 'absent'}"))
    with pytest.raises(NotRunnableHere, match="not a DeepGEMM checkout with its submodules"):
        deepgemm_src.require_here(parse(f"deepgemm-src:{tmp_path}"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the gate's skips on a machine without an NVIDIA GPU")
def test_the_gpu_gate_skips_the_source_builds_with_the_reason():
    cases = gate_config.select(gate_config.load(CONFIGS / "gpu.toml", device="cpu").cases, ("src",))
    assert len(cases) >= 10
    outcomes = [gate.run_case(case) for case in cases]
    assert all(o.skipped and "a CUDA source build needs nvcc and an NVIDIA GPU" in o.error for o in outcomes)


def test_the_op_refuses_shuffle_and_fnuz_before_building(tmp_path):
    writer = vllm_src.Writer(vllm_src.locate(str(_tree(tmp_path / "v"))), {})
    cuda = torch.device("cuda")
    with pytest.raises(ProducerError, match="writes row-major only .* run with --layout linear, not shuffle"):
        writer.check(CacheSpec(layout=Layout.SHUFFLE), cuda)
    with pytest.raises(NotRunnableHere, match="writes e4m3fn on NVIDIA"):
        writer.check(CacheSpec(layout=Layout.LINEAR, fp8=FP8Format.E4M3FNUZ), cuda)
    with pytest.raises(ProducerError, match="give --device cuda"):
        writer.check(CacheSpec(layout=Layout.LINEAR), torch.device("cpu"))


def test_deepgemm_sees_row_n_of_a_sequence_up_to_ctx_minus_next_n_plus_n():
    lens = deepgemm_src.context_2d(torch.tensor([10, 64], dtype=torch.int32), 2)
    assert lens.tolist() == [[9, 10], [63, 64]] and lens.dtype == torch.int32
    assert deepgemm_src.context_2d(torch.tensor([[3, 4]]), 2).tolist() == [[3, 4]]


def test_doctor_names_nvcc_and_the_arch_or_why_not():
    from fp8check.run.doctor import versions

    found = dict(versions())["nvcc (vllm-src)"]
    assert found.startswith("nvcc ") or "no CUDA toolkit found" in found or "no NVIDIA GPU" in found


def test_a_config_may_declare_division_against_reciprocal(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[[case]]\ncandidate = "reference-vllm"\nbaseline = "reference"\nlayout = "linear"\n'
                      'scale_fmt = "fp32"\nexpect = "rounding"\n')
    (case,) = gate_config.load(config).cases
    assert case.values["expect"] == "rounding"


@pytest.mark.skipif(not shutil.which("g++") or not shutil.which("readelf"), reason="needs g++ and readelf")
@pytest.mark.parametrize("static", [False, True])
def test_an_extension_with_its_own_static_libstdcxx_is_refused_with_the_fix(tmp_path, static):
    # a second, static libstdc++ in the process crashed DeepGEMM's std::regex (SIGSEGV) on a GPU host whose
    # CXX linked libstdc++ statically: the built library's NEEDED entries tell the two apart
    source = tmp_path / "r.cpp"
    source.write_text('#include <regex>\nbool m(const char* s) { return std::regex_match(s, std::regex("[a-z]+")); }\n')
    library = tmp_path / "libr.so"
    subprocess.run(["g++", "-shared", "-fPIC", *(["-static-libstdc++"] if static else []), "-o", str(library),
                    str(source)], check=True)
    assert ("libstdc++.so.6" in build.needed(library)) is not static
    if static:
        with pytest.raises(ProducerError, match=r"static copy of libstdc\+\+ .* e\.g\. CXX=c\+\+ CC=gcc"):
            build._require_shared_libstdcxx(library)
    else:
        build._require_shared_libstdcxx(library)


def test_an_exported_deepgemm_tree_inside_another_repository_takes_its_commit_from_the_stamp(tmp_path):
    # a tree without .git inside some other checkout: `git -C` would walk up and name that repository's HEAD
    root = tmp_path / "repo" / "DeepGEMM"
    for relative in (deepgemm_src.API, *deepgemm_src.HEADERS.values()):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).mkdir() if relative != deepgemm_src.API else (root / relative).write_text("// api\n")
    (root / "COMMIT").write_text("54e2261e\n")
    (root / "CUTLASS").write_text("\n")  # an empty stamp says no more than a missing one
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    subprocess.run(["git", "-C", str(tmp_path / "repo"), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    checkout = deepgemm_src.locate(str(root))
    assert checkout.commit == "54e2261e" and checkout.cutlass == "unknown"


def test_a_source_builds_provenance_names_its_commit_without_a_git_revision():
    from fp8check.report.terminal import describe_provenance

    checkout = deepgemm_src.Checkout(Path("DG"), "DG", "54e2261e", "f3fde583", "ab" * 32)
    text = describe_provenance(deepgemm_src.provenance(checkout))
    assert text.startswith("fp8_paged_mqa_logits (DeepGEMM JIT) from csrc/python_api.cpp at commit 54e2261e,")
    assert describe_provenance({"function": "f", "file": "w.py", "revision": "HEAD~1", "commit": "c0ffee",
                                "sha256": "00"}) == "f from w.py at git HEAD~1 = c0ffee, sha256 00"
