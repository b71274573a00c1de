"""Building a CUDA translation unit cut from a project's source, with a binding of fp8check's own, into a
torch extension for the GPU present (torch.utils.cpp_extension.load, ninja), kept in fp8check's cache folder
under `key`: what the cache holds is loaded only through that key."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import disk_cache
from ..core.errors import ProducerError, one_line
from .toolchain import Toolchain

CXX_FLAGS = ("-O3",)


@dataclass(frozen=True)
class Unit:
    """What one build compiles: `kernel` (.cu: the project's text cut out, and a launcher), `binding`
    (.cpp: the torch entry point) and the project files they include from `include_root`."""

    name: str  # module name stem, e.g. "vllm_indexer_k"
    include_root: Path
    files: tuple[str, ...]  # project files read by the build (relative to include_root): hashed into the key
    kernel: str
    binding: str
    nvcc_flags: tuple[str, ...] = ()  # the project's own, after torch's COMMON_NVCC_FLAGS

    def digest(self) -> str:
        sha = hashlib.sha256()
        for relative in self.files:
            sha.update(relative.encode() + b"\0" + (self.include_root / relative).read_bytes() + b"\0")
        sha.update(self.kernel.encode() + b"\0" + self.binding.encode())
        return sha.hexdigest()


def flags(unit: Unit, toolchain: Toolchain) -> tuple[str, ...]:
    """nvcc's flags beyond torch's: the project's, and one gencode for the GPU present."""
    return (*unit.nvcc_flags, toolchain.gencode)


def key(unit: Unit, toolchain: Toolchain) -> str:
    """The cache key: the sources, the compiler, the arch, the flags and the torch that links it."""
    import torch

    return disk_cache.key_of({"unit": unit.digest(), "nvcc": toolchain.version, "arch": toolchain.arch,
                              "flags": list(flags(unit, toolchain)), "torch": torch.__version__})


def command_line(unit: Unit, toolchain: Toolchain) -> str:
    """The kernel's compile, as provenance states it (torch adds its include folders and defines)."""
    return " ".join([str(toolchain.nvcc), *flags(unit, toolchain), f"-I{unit.include_root}", f"{unit.name}.cu"])


@dataclass(frozen=True)
class Built:
    module: object  # the loaded extension
    key: str
    seconds: float  # the build (or the up-to-date check of a cached one)
    cached: bool  # the build folder held this build already


_LOADED: dict[str, Built] = {}


def build(unit: Unit, toolchain: Toolchain) -> Built:
    """The extension for `unit`, built once per key (or found in the cache folder); ProducerError with
    the compiler's first error otherwise."""
    digest = key(unit, toolchain)
    folder = _folder(unit.name, digest)
    sources = (folder / f"{unit.name}.cu", folder / f"{unit.name}_binding.cpp")
    for path, text in zip(sources, (unit.kernel, unit.binding)):
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    return load_extension(unit.name, digest, sources, include_dirs=(unit.include_root,), cxx_flags=CXX_FLAGS,
                          cuda_flags=flags(unit, toolchain), toolchain=toolchain)


def _folder(stem: str, digest: str) -> Path:
    folder = disk_cache.entry("cuda-src", digest) or Path(tempfile.mkdtemp(prefix=f"fp8check-{stem}-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def load_extension(stem: str, digest: str, sources, *, include_dirs=(), cxx_flags=(), cuda_flags=(),
                   ld_flags=(), toolchain: Toolchain, shared_libstdcxx: bool = False) -> Built:
    """A project's sources (or a unit's) built as one torch extension in the cache folder of `digest`, and
    loaded; ProducerError with the compiler's first error otherwise. `shared_libstdcxx`: the extension must
    use this process's libstdc++ (code that uses std::locale, such as std::regex, crashes on a second,
    static copy: a host compiler that links libstdc++ statically is refused with the fix)."""
    from torch.utils import cpp_extension

    if digest in _LOADED:
        return _LOADED[digest]
    folder = _folder(stem, digest)
    name = f"fp8check_{stem}_{digest[:16]}"
    cached = any(folder.glob(f"{name}*.so"))
    start = time.perf_counter()
    try:
        module = cpp_extension.load(name, [str(p) for p in sources], extra_cflags=list(cxx_flags),
                                    extra_cuda_cflags=list(cuda_flags), extra_ldflags=list(ld_flags),
                                    extra_include_paths=[str(d) for d in include_dirs], build_directory=str(folder),
                                    verbose=False)
    except Exception as exc:  # a compile error of the project's code as cut out, or of the binding
        errors = [line for line in str(exc).splitlines() if "error" in line.lower()] or [str(exc)]
        raise ProducerError(f"building {stem} with nvcc {toolchain.version} for {toolchain.arch} failed:"
                            f" {one_line(errors[0], 400)} (build folder {folder})") from exc
    if shared_libstdcxx:
        _require_shared_libstdcxx(next(folder.glob(f"{name}*.so"), None))
    _LOADED[digest] = Built(module, digest, time.perf_counter() - start, cached)
    return _LOADED[digest]


def needed(library: Path) -> list[str] | None:
    """The shared libraries an ELF file names as NEEDED (`readelf -d`), or None where readelf cannot say."""
    try:
        done = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", done.stdout) if done.returncode == 0 else None


def _require_shared_libstdcxx(library: Path | None) -> None:
    names = needed(library) if library is not None else None
    if names is not None and not any(n.startswith("libstdc++.so") for n in names):
        cxx = os.environ.get("CXX", "c++")
        raise ProducerError(f"{library.name} was linked with a static copy of libstdc++ (the host compiler"
                            f" CXX={cxx} has no shared one): a second libstdc++ in this process crashes its"
                            " std::locale users (DeepGEMM's std::regex); build with a compiler that links the"
                            " shared libstdc++, e.g. CXX=c++ CC=gcc")

