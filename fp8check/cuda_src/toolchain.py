"""The nvcc that builds CUDA sources for the GPU present: the one PyTorch's `cpp_extension` finds (its
CUDA_HOME), so the build and the torch that loads it agree; and the arch of that GPU (`sm_90` on an
H100/H200)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..core.errors import NotRunnableHere


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    version: str  # "13.0.48": the release line of `nvcc --version`, with its build number where given
    arch: str  # "sm_90": the GPU present

    @property
    def description(self) -> str:
        return f"nvcc {self.version} ({self.nvcc}) for {self.arch}"

    @property
    def gencode(self) -> str:
        """The one target built: machine code for this GPU only (no PTX for the driver to compile)."""
        return f"-gencode=arch=compute_{self.arch.removeprefix('sm_')},code={self.arch}"


def parse_version(text: str) -> str | None:
    """'13.0.48' from `nvcc --version` output ('Cuda compilation tools, release 13.0, V13.0.48')."""
    match = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", text) or re.search(r"release (\d+\.\d+)", text)
    return match and match.group(match.lastindex)


def arch_of(capability: tuple[int, int]) -> str:
    """(9, 0) -> 'sm_90'; (10, 0) -> 'sm_100'."""
    return "sm_{}{}".format(*capability)


@lru_cache(maxsize=1)
def _nvcc() -> tuple[Path | None, str]:
    """(nvcc, its version) or (None, why not)."""
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None:
        return None, "no CUDA toolkit found (torch.utils.cpp_extension.CUDA_HOME is unset: install nvcc or set CUDA_HOME)"
    nvcc = Path(cpp_extension.CUDA_HOME) / "bin" / "nvcc"
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{nvcc} does not run: {exc}"
    version = parse_version(out)
    return (nvcc, version) if version else (None, f"{nvcc} --version printed no release")


def find() -> tuple[Toolchain | None, str]:
    """(the toolchain, one line) or (None, why a build for the GPU cannot happen here)."""
    import torch

    nvcc, version = _nvcc()
    if nvcc is None:
        return None, version
    if not torch.cuda.is_available() or getattr(torch.version, "hip", None):
        return None, f"nvcc {version} found, but no NVIDIA GPU visible to torch"
    found = Toolchain(nvcc, version, arch_of(torch.cuda.get_device_capability()))
    return found, f"{found.description}, {torch.cuda.get_device_name()}"


def require() -> Toolchain:
    """The toolchain, or NotRunnableHere (a gate skips the case with the reason)."""
    found, reason = find()
    if found is None:
        raise NotRunnableHere(f"a CUDA source build needs nvcc and an NVIDIA GPU: {reason}")
    return found


def status() -> tuple[bool, str]:
    """(found, one line) for `fp8check doctor`: nvcc and the arch it would build for."""
    found, reason = find()
    nvcc, version = _nvcc()
    if found is None and nvcc:
        reason = f"nvcc {version} ({nvcc}), no NVIDIA GPU to build for"
    return found is not None, reason
