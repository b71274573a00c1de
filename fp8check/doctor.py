"""`fp8check doctor`: what can run here, gathered into frozen records; rendering is separate.

Facts: every producer with its availability and reason, what `auto` resolves to, the versions, the
device with its architecture and the FP8 format a real deployment uses there (SPEC.md section 4), and
whether the Triton interpreter's exact FP8 conversion is installed and passes its known-answer check.
"""

from __future__ import annotations

import importlib
import inspect
import platform as pyplatform
from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .adapters import first_line
from .adapters.platform import Platform, probe
from .spec import FP8Format

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

    def requirement(self, name: str) -> Check:
        """The check behind a --require name (see requirable())."""
        if name == GPU:
            return Check(GPU, self.platform.gpu, self.platform.describe())
        if name == TRITON_EXACT:
            bad = [c for c in self.triton_exact if not c.ok]
            return Check(name, not bad, (bad[0] if bad else self.triton_exact[0]).detail)
        if name.startswith(TRITON_EXACT + ":"):
            fmt = name.split(":", 1)[1]
            return next(c for c in self.triton_exact if c.name == fmt)
        return next(c for c in self.producers if c.name == name)

    @property
    def unmet(self) -> tuple[Check, ...]:
        """The requirements asked for that are not met here."""
        return tuple(check for check in map(self.requirement, self.required) if not check.ok)


def requirable() -> list[str]:
    from . import producers

    return [*producers.names(), GPU, TRITON_EXACT, *(f"{TRITON_EXACT}:{fmt.value}" for fmt in FP8Format)]


def producer_checks() -> tuple[Check, ...]:
    from . import producers

    checks = []
    for name in producers.names():
        try:
            ok, reason = producers.available(name)
        except Exception as exc:  # an availability probe must not raise; if one does, that is the fact
            ok, reason = False, f"availability check raised {first_line(exc)}"
        checks.append(Check(name, ok, reason, producers.BUILTIN[name][0]))
    return tuple(checks)


def auto_baseline(checks: tuple[Check, ...]) -> str:
    aiter = next((c for c in checks if c.name == "aiter"), None)
    if aiter is not None and aiter.ok:
        return "aiter"
    return "reference (PyTorch emulation of aiter; aiter unavailable)"


def triton_exact_checks() -> tuple[Check, ...]:
    """The exact-conversion module's known-answer check per format; 'not built' when it is absent."""
    try:
        module = importlib.import_module(".triton_exact", __package__)
    except ModuleNotFoundError as exc:
        if exc.name == f"{__package__}.triton_exact":
            return tuple(Check(fmt.value, False, "not built (fp8check/triton_exact.py is missing)") for fmt in FP8Format)
        return tuple(Check(fmt.value, False, f"import failed: {first_line(exc)}") for fmt in FP8Format)
    except Exception as exc:
        return tuple(Check(fmt.value, False, f"import failed: {first_line(exc)}") for fmt in FP8Format)
    try:
        per_format = bool(inspect.signature(module.check).parameters)
    except (AttributeError, TypeError, ValueError) as exc:
        return tuple(Check(fmt.value, False, f"no usable check(): {first_line(exc)}") for fmt in FP8Format)
    checks = []
    for fmt in FP8Format:
        try:
            ok, reason = module.check(fmt) if per_format else module.check()
        except Exception as exc:  # a crashing self-check is a broken checker: say so, never "ok"
            ok, reason = False, f"check() raised {first_line(exc)}"
        checks.append(Check(fmt.value, bool(ok), str(reason)))
    return tuple(checks)


def versions() -> tuple[tuple[str, str], ...]:
    import torch

    from .report import versions as package_versions

    found = package_versions()
    build = (
        f"ROCm {torch.version.hip}" if getattr(torch.version, "hip", None)
        else f"CUDA {torch.version.cuda}" if getattr(torch.version, "cuda", None) else "CPU only"
    )
    return (
        ("python", pyplatform.python_version()),
        ("torch", f"{found['torch']} ({build})"),
        ("triton", found["triton"]),
        ("fp8check", found["fp8check"]),
    )


def diagnose(required: tuple[str, ...] = ()) -> DoctorReport:
    unknown = [name for name in required if name not in requirable()]
    if unknown:
        raise ValueError(f"unknown requirement(s) {', '.join(unknown)}; known: {', '.join(requirable())}")
    platform = probe()
    checks = producer_checks()
    return DoctorReport(
        producers=checks, auto_baseline=auto_baseline(checks),
        versions=versions(), platform=platform, triton_exact=triton_exact_checks(),
        required=tuple(required),
    )


# ---- rendering -----------------------------------------------------------------------------------
def _status(ok: bool, good: str = "available", bad: str = "unavailable") -> Text:
    return Text(good, style="green") if ok else Text(bad, style="red")


def render(report: DoctorReport) -> Group:
    producers = Table(title="producers", title_justify="left")
    producers.add_column("producer")
    producers.add_column("status")
    producers.add_column("reason")
    for check in report.producers:
        producers.add_row(check.name, _status(check.ok), check.detail)

    env = Table(title="environment", title_justify="left", show_header=False)
    env.add_column("what")
    env.add_column("value")
    for name, version in report.versions:
        env.add_row(name, version)
    p = report.platform
    env.add_row("device", p.describe())
    env.add_row("architecture", p.arch)
    env.add_row("deployment FP8", f"{p.fp8.value} (e4m3fnuz on gfx94x, e4m3fn elsewhere)")
    env.add_row("auto baseline", report.auto_baseline)
    for check in report.triton_exact:
        env.add_row(Text.assemble(f"triton exact ({check.name}) ", _status(check.ok, "ok", "not ok")), check.detail)

    parts = [producers, env]
    for check in report.unmet:
        parts.append(Text(f"required {check.name} is not met: {check.detail}", style="bold red"))
    if report.required and not report.unmet:
        parts.append(Text(f"all required met: {', '.join(report.required)}", style="bold green"))
    return Group(*parts)


def to_json(report: DoctorReport) -> dict:
    p = report.platform
    return {
        "producers": [
            {"name": c.name, "available": c.ok, "reason": c.detail, "description": c.description}
            for c in report.producers
        ],
        "auto_baseline": report.auto_baseline,
        "versions": dict(report.versions),
        "device": {"backend": p.backend.value, "gpu": p.gpu, "name": p.device_name, "arch": p.arch,
                   "deployment_fp8": p.fp8.value},
        "triton_exact": {c.name: {"ok": c.ok, "reason": c.detail} for c in report.triton_exact},
        "required": list(report.required),
        "unmet": [{"name": c.name, "reason": c.detail} for c in report.unmet],
    }
