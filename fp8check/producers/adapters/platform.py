"""What torch was built for and which accelerator it sees: the facts that decide which real writers
can run and which FP8 format they write (docs/NUMERICS.md)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...core.errors import ProducerError
from ...core.spec import FP8Format


class Backend(enum.Enum):
    """The torch build: ROCm (torch.version.hip), CUDA (torch.version.cuda), or neither."""

    CPU = "cpu"
    CUDA = "cuda"
    ROCM = "rocm"


def fp8_for_arch(arch: str) -> FP8Format:
    """The format a real deployment uses on this architecture: vLLM and aiter pick e4m3fnuz iff the
    arch string contains `gfx94` (MI300/MI325 = gfx942); everything else, gfx950 included, is e4m3fn."""
    return FP8Format.E4M3FNUZ if "gfx94" in arch else FP8Format.E4M3FN


@dataclass(frozen=True)
class Platform:
    backend: Backend
    gpu: bool  # torch sees an accelerator
    device_name: str
    arch: str  # gcnArchName on ROCm (e.g. "gfx942:sramecc+:xnack-"), sm_XX on CUDA, "cpu"
    torch_device: str  # device type of the tensors a real writer takes: "cuda" on ROCm too

    @property
    def fp8(self) -> FP8Format:
        return fp8_for_arch(self.arch)

    def require_device(self, who: str, device, place: str = "the GPU") -> None:
        """ProducerError unless the tensors would live where this platform's writer or reader runs."""
        if device.type != self.torch_device:
            raise ProducerError(f"{who} runs on {place}, not on {device}: use --device cuda")

    def require_format(self, who: str, fmt: FP8Format, verb: str = "writes") -> None:
        """ProducerError unless `fmt` is the format the real writer (or reader) uses on this architecture."""
        if fmt is not self.fp8:
            raise ProducerError(f"{who} {verb} {self.fp8.value} on {self.arch}, not {fmt.value}: run with --fp8"
                                f" {self.fp8.value}")

    def describe(self) -> str:
        if not self.gpu:
            return f"no GPU visible (torch built for {self.backend.value})"
        return f"{self.device_name} ({self.arch}, {self.backend.value})"


def probe(index: int = 0) -> Platform:
    """The platform of accelerator `index` (or the CPU when torch sees none)."""
    import torch
    backend = Backend.ROCM if getattr(torch.version, "hip", None) else \
        Backend.CUDA if getattr(torch.version, "cuda", None) else Backend.CPU
    if not torch.cuda.is_available():
        return Platform(backend, False, "cpu", "cpu", "cpu")
    props = torch.cuda.get_device_properties(index)
    arch = (getattr(props, "gcnArchName", "") or "gfx?") if backend is Backend.ROCM else \
        f"sm_{props.major}{props.minor}"
    return Platform(backend, True, props.name, arch, "cuda")


def require_gpu(platform: Platform) -> None:
    from . import Unavailable
    if not platform.gpu:
        raise Unavailable("it runs on a GPU, and torch sees none (torch.cuda.is_available() is False)")
