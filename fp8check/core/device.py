"""The machine a run uses: the torch device (`auto`, `cpu`, `cuda`, refused in one line when absent) and
the versions of what runs there."""

from __future__ import annotations

import contextlib
from importlib import metadata

from .errors import DeviceError, NotRunnableHere

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(name: str) -> torch.device:
    import torch  # here, not at the top: the CLI imports DEVICE_CHOICES at startup

    if name not in DEVICE_CHOICES:
        raise DeviceError(f"--device {name!r}: expected one of {', '.join(DEVICE_CHOICES)}")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False)")
    return torch.device(name)


def versions() -> dict[str, str]:
    out = dict.fromkeys(("torch", "triton", "fp8check"), "not installed")
    for name in out:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    with contextlib.suppress(ImportError):  # the imported torch may not be the installed one (a source build)
        import torch

        out["torch"] = torch.__version__
    return out


FNUZ_ON_NVIDIA = ("e4m3fnuz (fp8e4b8) is not supported by Triton on NVIDIA GPUs; run it under the exact interpreter"
                  " with --device cpu")


def require_triton_format(fmt, device) -> None:
    """A Triton kernel compiled for `device` can write `fmt` (an FP8Format): compiled Triton on NVIDIA has no
    fp8e4b8 (docs/NUMERICS.md), so e4m3fnuz there is NotRunnableHere, one line, for every Triton writer."""
    import torch

    if device.type == "cuda" and fmt.value == "e4m3fnuz" and torch.version.hip is None:
        raise NotRunnableHere(FNUZ_ON_NVIDIA)
