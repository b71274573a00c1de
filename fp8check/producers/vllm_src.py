"""`vllm-src:PATH`: vLLM's CUDA op `indexer_k_quant_and_cache` (csrc/cache_kernels.cu), built with nvcc for the
GPU present from vLLM's sdist or its unpacked tree, and run as a producer (docs/nvidia.md). Only the op is
built: its kernel, the `kFp8ScaleDivisor` block and the host function's launch statements are cut out of the
file by name (cuda_src/extract.py) and launched by fp8check's own binding as the op's dispatch does.
"""

from __future__ import annotations

import hashlib
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import torch

from ..code.names import Kind, Name, parse
from ..code.released import unpacked_once
from ..core.errors import NotRunnableHere, ProducerError
from ..core.producer import Producer
from ..core.spec import CacheSpec, FP8Format, Layout
from ..cuda_src import build, extract, toolchain as toolchains

PREFIX = Kind.VLLM_SRC.value
OP_FILE = "csrc/cache_kernels.cu"
HEADER = "quantization/w8a8/fp8/nvidia/quant_utils.cuh"  # relative to csrc/
KERNEL = "indexer_k_quant_and_cache_kernel"
HOST = "indexer_k_quant_and_cache"
DIVISOR = "kFp8ScaleDivisor"
# The host function's statements the binding runs as they are: launch geometry and scale-format switches.
HOST_STATEMENTS = (r"constexpr\s+int\s+vec_size\b", r"dim3\s+grid\b", r"dim3\s+block\b",
                   r"bool\s+use_mx_scale\b", r"bool\s+use_ue8m0\b")
CACHE_DTYPE = '"fp8_e4m3"'  # the op dispatches its kernel on this kv-cache dtype, whatever the caller says
# vLLM's flags for this file (cmake/utils.cmake, docs/nvidia.md): no --use_fast_math, so `/` is IEEE division.
NVCC_FLAGS = ("-O3", "-DENABLE_FP8", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__")


@dataclass(frozen=True)
class Source:
    root: Path  # the folder holding csrc/
    label: str  # what the user gave
    version: str  # "0.33.0" from PKG-INFO, else "unknown"
    archive_sha256: str | None  # the sdist's, when one was given
    op_sha256: str  # cache_kernels.cu's


def _unpack(archive: Path) -> tuple[Path, str]:
    """csrc/ and PKG-INFO of an sdist, unpacked once per archive sha256."""
    def extract(staging: Path) -> Path:
        try:
            with tarfile.open(archive) as tar:
                top = tar.getnames()[0].split("/")[0]
                members = [m for m in tar.getmembers() if m.name.startswith((f"{top}/csrc/", f"{top}/PKG-INFO"))]
                tar.extractall(staging, members, filter="data")
        except (OSError, tarfile.TarError) as exc:
            raise ProducerError(f"vllm-src:{archive}: cannot unpack: {exc}") from None
        return staging / top

    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    return unpacked_once("vllm-src", digest, OP_FILE, extract), digest


def locate(name: Name | str) -> Source:
    """The vLLM source a name points at; ProducerError saying what is missing."""
    name = name if isinstance(name, Name) else parse(PREFIX + str(name), error=ProducerError)
    path = Path(name.body)
    sdist = path.is_file() and path.name.endswith((".tar.gz", ".tgz"))
    root, archive_sha256 = _unpack(path) if sdist else (path, None)
    op = root / OP_FILE
    if not op.is_file():
        raise ProducerError(f"vllm-src:{name.body}: no {OP_FILE} there (give vLLM's sdist vllm-X.Y.Z.tar.gz"
                            " or its unpacked folder)")
    info = root / "PKG-INFO"
    version = re.search(r"^Version: (\S+)", info.read_text(), re.M) if info.is_file() else None
    return Source(root, name.body, version.group(1) if version else "unknown", archive_sha256,
                  hashlib.sha256(op.read_bytes()).hexdigest())


def _kernel_unit(source: Source) -> str:
    what = f"vllm-src:{source.label}: {OP_FILE}"
    text = (source.root / OP_FILE).read_text()
    host = extract.function(text, HOST, kernel=False, what=what)
    if CACHE_DTYPE not in host:
        raise ProducerError(f"{what}: {HOST} no longer dispatches on {CACHE_DTYPE}; the binding does")
    statements = "\n  ".join(extract.statement(host, pattern, what) for pattern in HOST_STATEMENTS)
    return f"""// Cut by fp8check from {OP_FILE} of vLLM {source.version} (sha256 {source.op_sha256}).
#include <cstdint>
#include <string>
#include <cuda.h>
#include <cuda_runtime.h>
#include "{HEADER}"

{extract.block_defining(text, DIVISOR, what)}

namespace vllm {{
{extract.function(text, KERNEL, kernel=True, what=what)}
}}  // namespace vllm

int fp8check_launch(const void* k, void* kv_cache, const int64_t* slot_mapping, int num_tokens, int head_dim,
                    int cache_block_size, int64_t cache_block_stride, int64_t quant_block_size,
                    const char* scale_fmt_text, cudaStream_t stream) {{
  const std::string scale_fmt(scale_fmt_text);
  {statements}
  vllm::{KERNEL}<__nv_bfloat16, uint8_t, vllm::Fp8KVCacheDataType::kFp8E4M3><<<grid, block, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(k), reinterpret_cast<uint8_t*>(kv_cache), slot_mapping, head_dim,
      quant_block_size, cache_block_size, cache_block_stride, use_ue8m0, use_mx_scale);
  return static_cast<int>(cudaGetLastError());
}}
"""


BINDING = """// fp8check's binding: the op's torch signature, launched on torch's current stream.
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <ATen/cuda/CUDAContext.h>

int fp8check_launch(const void*, void*, const int64_t*, int, int, int, int64_t, int64_t, const char*, cudaStream_t);

void indexer_k_quant_and_cache(torch::Tensor k, torch::Tensor kv_cache, torch::Tensor slot_mapping,
                               int64_t quant_block_size, std::string scale_fmt) {
  TORCH_CHECK(k.is_cuda() && kv_cache.device() == k.device() && slot_mapping.device() == k.device(),
              "k, kv_cache and slot_mapping must be on one CUDA device");
  TORCH_CHECK(k.scalar_type() == at::kBFloat16 && k.is_contiguous() && k.dim() == 2, "k: contiguous bf16 [T, D]");
  TORCH_CHECK(kv_cache.scalar_type() == at::kByte && kv_cache.dim() == 3, "kv_cache: uint8 [blocks, block, stride]");
  TORCH_CHECK(slot_mapping.scalar_type() == at::kLong && slot_mapping.is_contiguous(), "slot_mapping: int64");
  TORCH_CHECK(k.size(1) % quant_block_size == 0, "head_dim must be divisible by quant_block_size");
  if (k.size(0) == 0) return;
  const c10::cuda::CUDAGuard guard(k.device());
  const int rc = fp8check_launch(k.data_ptr(), kv_cache.data_ptr(), slot_mapping.data_ptr<int64_t>(),
                                 static_cast<int>(k.size(0)), static_cast<int>(k.size(1)),
                                 static_cast<int>(kv_cache.size(1)), kv_cache.stride(0), quant_block_size,
                                 scale_fmt.c_str(), at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(rc == 0, "kernel launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(rc)));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("indexer_k_quant_and_cache", &indexer_k_quant_and_cache); }
"""


def unit(source: Source) -> build.Unit:
    csrc = source.root / "csrc"
    return build.Unit("vllm_indexer_k", csrc, extract.headers(csrc, HEADER), _kernel_unit(source), BINDING, NVCC_FLAGS)


def _known_answer(op) -> None:
    """Run at build time: a row of ones must write e4m3fn's max code 0x7e with the scale fl(1/448)."""
    head_dim, block = 128, 16
    k = torch.ones(1, head_dim, dtype=torch.bfloat16, device="cuda")
    cache = torch.zeros(1, block, head_dim + 4, dtype=torch.uint8, device="cuda")
    op(k, cache, torch.zeros(1, dtype=torch.int64, device="cuda"), 128, "")
    flat = cache[0].flatten().cpu()
    scale = flat[block * head_dim:block * head_dim + 4].view(torch.float32)
    expected = torch.tensor([1.0], dtype=torch.float32) / 448.0  # fmaxf(amax, 1e-4) / kFp8ScaleDivisor
    if not bool((flat[:head_dim] == 0x7E).all()) or not torch.equal(scale, expected):
        raise ProducerError(f"the build of vLLM's op failed its known-answer check: a row of ones gave codes"
                            f" {sorted(set(flat[:head_dim].tolist()))} and scale {scale.item()!r}")


FETCH_HINT = "pip download --no-deps --no-binary :all: vllm==VERSION fetches it (only the sdist is needed)"


def require_here(name: Name) -> None:
    """nvcc, an NVIDIA GPU and the named source, or NotRunnableHere with the reason (a gate skips the case)."""
    toolchains.require()
    if not Path(name.body).exists():
        raise NotRunnableHere(f"{name.text}: the vLLM source is not here ({FETCH_HINT})")


@dataclass
class Writer:
    source: Source
    provenance: dict  # the Producer's: the build's key and time are added once it is built
    built: build.Built | None = None

    def op(self):
        if self.built is None:
            self.built = build.build(unit(self.source), toolchains.require())
            _known_answer(self.built.module.indexer_k_quant_and_cache)
            self.provenance.update(build_key=self.built.key, build_s=round(self.built.seconds, 1),
                                   build_cached=self.built.cached)
        return self.built.module.indexer_k_quant_and_cache

    def check(self, spec: CacheSpec, device: torch.device) -> None:
        if device.type != "cuda":
            raise ProducerError("vllm-src builds vLLM's CUDA op for the GPU: give --device cuda")
        if spec.layout is not Layout.LINEAR:
            raise ProducerError(f"vLLM's CUDA op writes row-major only (its kernel stores token t's values at"
                                f" t*head_dim + d): run with --layout linear, not {spec.layout.value}")
        if spec.fp8 is not FP8Format.E4M3FN:
            raise NotRunnableHere(f"vLLM's CUDA op writes e4m3fn on NVIDIA (__NV_E4M3), not {spec.fp8.value}")
        self.op()

    def __call__(self, k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        self.op()(k.to(torch.bfloat16).contiguous(), kv_cache, slot_mapping.to(torch.int64).contiguous(),
                  quant_block_size, scale_fmt or "")


def provenance(source: Source) -> dict:
    """Where the op comes from and what builds it: the release, the file's sha256, nvcc and the arch."""
    found, reason = toolchains.find()
    where = {"sdist_sha256": source.archive_sha256} if source.archive_sha256 else {}
    return {"function": f"{HOST} ({KERNEL})", "source": source.label, "release": f"vllm {source.version}",
            **where, "file": OP_FILE, "sha256": source.op_sha256,
            "compiler": found.description if found else reason, "arch": found.arch if found else "none",
            "command": build.command_line(unit(source), found) if found else "not built"}


def load(name: Name):
    """The Producer for `vllm-src:...`; the op is built (or found in the cache folder) when it first runs."""
    source = locate(name)
    writer = Writer(source, provenance(source))
    description = f"vLLM {source.version}'s CUDA indexer_k_quant_and_cache built from source with nvcc"
    return Producer(name.text, description, writer, check=writer.check, provenance=writer.provenance)
