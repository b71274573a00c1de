"""`deepgemm-src:PATH`: DeepGEMM's `fp8_paged_mqa_logits` as a reader for `parity`, built from a DeepGEMM checkout
(with its submodules' headers) through DeepGEMM's own JIT for the GPU present (docs/nvidia.md). It reads the
LINEAR layout, whatever was written, as a deployment would. The JIT's cache folder is DeepGEMM's own
(`DG_JIT_CACHE_DIR`, else ~/.deep_gemm).
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from ...code.names import Kind, Name, parse
from ...core import disk_cache
from ...core.errors import NotRunnableHere, ProducerError
from ...core.producer import Reader
from ...core.spec import CacheSpec, FP8Format
from ...cuda_src import build, toolchain as toolchains

PREFIX = Kind.DEEPGEMM_SRC.value
API = "csrc/python_api.cpp"
HEADERS = {"deep_gemm": "deep_gemm/include/deep_gemm", "cute": "third-party/cutlass/include/cute",
           "cutlass": "third-party/cutlass/include/cutlass"}
INCLUDES = ("deep_gemm/include", "third-party/cutlass/include", "third-party/fmt/include")
# DeepGEMM's setup.py: its C++ flags and libraries (the JIT compiles the kernels itself, with its own flags).
CXX_FLAGS = ("-std=c++17", "-O3", "-fPIC", "-Wno-psabi", "-Wno-deprecated-declarations")
BLOCK_KV = {9: (64,), 10: (32, 64)}  # the block sizes its paged kernels take, per arch major


@dataclass(frozen=True)
class Checkout:
    root: Path
    label: str
    commit: str  # DeepGEMM's, "unknown" outside git
    cutlass: str  # the submodule commit recorded by DeepGEMM's tree, "unknown" outside git
    api_sha256: str


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def locate(name: Name | str) -> Checkout:
    name = name if isinstance(name, Name) else parse(PREFIX + str(name), error=ProducerError)
    root = Path(name.body)
    missing = [p for p in (API, *HEADERS.values()) if not (root / p).exists()]
    if missing:
        raise NotRunnableHere(f"{name.text}: not a DeepGEMM checkout with its submodules (missing"
                              f" {', '.join(missing)}; `git submodule update --init` fetches cutlass and fmt)")
    top = _git(root, "rev-parse", "--show-toplevel")  # git walks up: an exported tree may sit in another repo
    own = bool(top) and Path(top).resolve() == root.resolve()
    commit = (_git(root, "rev-parse", "HEAD") if own else "") or _stamp(root, "COMMIT")
    tree = (_git(root, "ls-tree", "HEAD", "third-party/cutlass") if own else "").split()  # mode, type, commit, path
    cutlass = (tree[2] if len(tree) > 2 else "") or _stamp(root, "CUTLASS")
    api = hashlib.sha256((root / API).read_bytes()).hexdigest()
    return Checkout(root, name.body, commit, cutlass, api)


def _stamp(root: Path, what: str) -> str:
    """A commit written beside an exported tree (no .git): `COMMIT` / `CUTLASS` files, else (or empty) unknown."""
    path = root / what
    return (path.read_text().strip() if path.is_file() else "") or "unknown"


def _digest(checkout: Checkout, found: toolchains.Toolchain) -> str:
    sha = hashlib.sha256()
    for folder in ("csrc", *INCLUDES):
        for path in sorted((checkout.root / folder).rglob("*")):
            if path.is_file() and path.suffix in (".h", ".hpp", ".cuh", ".cpp", ".cu", ".inl"):
                sha.update(str(path.relative_to(checkout.root)).encode() + b"\0" + path.read_bytes())
    return disk_cache.key_of({"deepgemm": sha.hexdigest(), "nvcc": found.version, "arch": found.arch,
                              "torch": torch.__version__, "flags": list(CXX_FLAGS)})


def library_root(checkout: Checkout, digest: str) -> Path:
    """A folder with include/{deep_gemm,cute,cutlass} linked to the checkout: what DeepGEMM's JIT reads."""
    root = disk_cache.entry("deepgemm-root", digest) or Path(tempfile.mkdtemp(prefix="fp8check-deepgemm-"))
    include = root / "include"
    include.mkdir(parents=True, exist_ok=True)
    for name, relative in HEADERS.items():
        link = include / name
        if not link.exists():
            link.symlink_to((checkout.root / relative).resolve(), target_is_directory=True)
    return root


_LIBRARIES: dict[str, object] = {}  # build key -> DeepGEMM's initialised torch extension


def library(checkout: Checkout):
    found = toolchains.require()
    digest = _digest(checkout, found)
    if digest not in _LIBRARIES:
        from torch.utils import cpp_extension
        cuda = Path(cpp_extension.CUDA_HOME)
        built = build.load_extension(
            "deepgemm", digest, [checkout.root / API],
            include_dirs=(cuda / "include", cuda / "include" / "cccl", *(checkout.root / i for i in INCLUDES)),
            cxx_flags=(*CXX_FLAGS, f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}"),
            ld_flags=(f"-L{cuda / 'lib64'}", "-lcudart", "-lnvrtc"), toolchain=found, shared_libstdcxx=True)
        built.module.init(str(library_root(checkout, digest)), str(cuda))
        _LIBRARIES[digest] = built.module
    return _LIBRARIES[digest]


def context_2d(context_lens: torch.Tensor, next_n: int) -> torch.Tensor:
    """fp8check's context lengths ([B]: the sequence's; [B, next_n]: per row) as DeepGEMM's [B, next_n]:
    the tokens row n may see, ctx - next_n + n + 1."""
    if context_lens.dim() == 2:
        return context_lens.to(torch.int32).contiguous()
    rows = torch.arange(next_n, device=context_lens.device, dtype=torch.int32)
    return (context_lens.to(torch.int32)[:, None] - next_n + rows[None, :] + 1).contiguous()


def provenance(checkout: Checkout) -> dict:
    found, reason = toolchains.find()
    return {"function": "fp8_paged_mqa_logits (DeepGEMM JIT)", "source": checkout.label,
            "commit": checkout.commit, "cutlass": checkout.cutlass, "file": API, "sha256": checkout.api_sha256,
            "compiler": found.description if found else reason, "arch": found.arch if found else "none"}


def require_here(name: Name) -> None:
    """nvcc, an NVIDIA GPU and the checkout, or NotRunnableHere with the reason (a gate skips the case)."""
    toolchains.require()
    locate(name)


def reader(name: Name, spec: CacheSpec) -> Reader:
    checkout = locate(name)

    def read(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
        lib = library(checkout)
        lens = context_2d(context_lens, q_fp8.shape[1])
        schedule = lib.get_paged_mqa_logits_metadata(lens, kv_cache.shape[1], lib.get_num_sms())
        logits = lib.fp8_paged_mqa_logits(q_fp8.contiguous(), kv_cache, weights.contiguous(), lens,
                                          block_tables.to(torch.int32), schedule, max_model_len, False)
        # DeepGEMM leaves the positions a row cannot see unwritten with 2-D lengths: -inf, as vLLM's top-k reads them
        positions = torch.arange(logits.shape[1], device=logits.device)
        return logits.masked_fill(positions[None, :] >= lens.reshape(-1, 1), float("-inf"))

    def check(spec: CacheSpec, device: torch.device) -> None:
        if device.type != "cuda":
            raise ProducerError("deepgemm-src runs on the GPU: give --device cuda")
        major = torch.cuda.get_device_capability(device)[0]
        if major not in BLOCK_KV:
            raise NotRunnableHere(f"DeepGEMM's paged MQA logits run on SM90 and SM100, not sm_{major}x")
        if spec.block_size not in BLOCK_KV[major]:
            raise ProducerError(f"DeepGEMM's paged MQA logits on sm_{major}0 read blocks of"
                                f" {' or '.join(map(str, BLOCK_KV[major]))} tokens: run with --block 64")
        if spec.fp8 is not FP8Format.E4M3FN:
            raise NotRunnableHere(f"DeepGEMM reads e4m3fn caches, not {spec.fp8.value}")
        library(checkout)

    return Reader(name.text, f"DeepGEMM {checkout.commit[:12]}'s fp8_paged_mqa_logits (JIT, reads LINEAR)",
                  read, check=check, provenance=provenance(checkout))
