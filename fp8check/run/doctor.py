"""`fp8check doctor`: what can run here, gathered into frozen records; rendering is separate.

Every producer with its availability, what `auto` resolves to, the versions, the device with the FP8 format a
real deployment uses there, and whether the interpreter's exact FP8 conversion passes its known answers."""

from __future__ import annotations

import platform as pyplatform
from dataclasses import dataclass

from ..core.errors import first_line
from ..producers import registry as producers
from ..producers.adapters.platform import Platform, probe
from ..core.spec import FP8Format

GPU = "gpu"
TRITON_EXACT = "triton-exact"  # every format; `triton-exact:FMT` for one


@dataclass(frozen=True)
class Check:
    """One fact that can be good or bad, with the one-line reason."""

    name: str
    ok: bool
    detail: str
    description: str = ""  # what the thing is (producers)


@dataclass(frozen=True)
class DoctorReport:
    producers: tuple[Check, ...]  # name = producer name
    auto_baseline: str
    versions: tuple[tuple[str, str], ...]
    platform: Platform
    triton_exact: tuple[Check, ...]  # name = FP8 format value
    required: tuple[str, ...]
    kind = "doctor"

    def requirement(self, name: str) -> Check:
        """The check behind a --require name (see requirable())."""
        if name == GPU:
            return Check(GPU, self.platform.gpu, self.platform.describe())
        if name == TRITON_EXACT:
            bad = [c for c in self.triton_exact if not c.ok]
            return Check(name, not bad, (bad[0] if bad else self.triton_exact[0]).detail)
        if name.startswith(TRITON_EXACT + ":"):
            return next(c for c in self.triton_exact if c.name == name.split(":", 1)[1])
        return next(c for c in self.producers if c.name == name)

    @property
    def unmet(self) -> tuple[Check, ...]:
        """The requirements asked for that are not met here."""
        return tuple(check for check in map(self.requirement, self.required) if not check.ok)

    @property
    def passed(self) -> bool:
        return not self.unmet

    def verdict_line(self) -> str:
        if self.unmet:
            return "FAIL: required " + "; ".join(f"{c.name} is not met ({c.detail})" for c in self.unmet)
        available = sum(c.ok for c in self.producers)
        met = f"; all required met: {', '.join(self.required)}" if self.required else ""
        return f"PASS: {available} of {len(self.producers)} producers can run here{met}"

    def top_cause(self) -> str | None:
        return f"{self.unmet[0].name}: {self.unmet[0].detail}" if self.unmet else None

    def detail(self) -> str:
        return "\n".join(f"{c.name}: {c.detail}" for c in self.unmet)

    def to_json(self) -> dict:
        p = self.platform
        return {
            "producers": [{"name": c.name, "available": c.ok, "reason": c.detail, "description": c.description}
                          for c in self.producers],
            "auto_baseline": self.auto_baseline,
            "versions": dict(self.versions),
            "device": {"backend": p.backend.value, "gpu": p.gpu, "name": p.device_name, "arch": p.arch,
                       "deployment_fp8": p.fp8.value},
            "triton_exact": {c.name: {"ok": c.ok, "reason": c.detail} for c in self.triton_exact},
            "required": list(self.required),
            "unmet": [{"name": c.name, "reason": c.detail} for c in self.unmet],
        }

    def run_json(self) -> dict:
        return {}

    def views(self) -> tuple:
        return ()


def requirable() -> list[str]:
    return [*producers.names(), GPU, TRITON_EXACT, *(f"{TRITON_EXACT}:{fmt.value}" for fmt in FP8Format)]


def producer_checks() -> tuple[Check, ...]:
    checks = []
    for name in producers.names():
        try:
            ok, reason = producers.available(name)
        except Exception as exc:  # an availability probe must not raise; if one does, that is the fact
            ok, reason = False, f"availability check raised {first_line(exc)}"
        checks.append(Check(name, ok, reason, producers.REGISTRY[producers.Role.WRITER][name].description))
    return tuple(checks)


def triton_exact_checks() -> tuple[Check, ...]:
    """The interpreter's exact-conversion known-answer check, per format."""
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        return tuple(Check(fmt.value, False, f"triton is not importable ({first_line(exc)})") for fmt in FP8Format)
    from ..triton_cpu.known_answers import check

    return tuple(Check(fmt.value, *check(fmt)) for fmt in FP8Format)


def versions() -> tuple[tuple[str, str], ...]:
    import torch

    from ..cuda_src import toolchain
    from ..hip_cpu import compiler
    from ..core.device import versions as package_versions

    found = package_versions()
    build = (f"ROCm {torch.version.hip}" if getattr(torch.version, "hip", None)
             else f"CUDA {torch.version.cuda}" if getattr(torch.version, "cuda", None) else "CPU only")
    return (("python", pyplatform.python_version()), ("torch", f"{found['torch']} ({build})"),
            ("triton", found["triton"]), ("fp8check", found["fp8check"]),
            ("clang (aiter-src)", compiler.status()[1]), ("nvcc (vllm-src)", toolchain.status()[1]))


def diagnose(required: tuple[str, ...] = ()) -> DoctorReport:
    unknown = [name for name in required if name not in requirable()]
    if unknown:
        raise ValueError(f"unknown requirement(s) {', '.join(unknown)}; known: {', '.join(requirable())}")
    platform, checks = probe(), producer_checks()
    auto = ("aiter" if any(c.name == "aiter" and c.ok for c in checks)
            else "reference (PyTorch emulation of aiter; aiter unavailable)")
    return DoctorReport(producers=checks, auto_baseline=auto, versions=versions(), platform=platform,
                        triton_exact=triton_exact_checks(), required=tuple(required))
