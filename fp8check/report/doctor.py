"""`fp8check doctor` rendered for the terminal. Nothing here prints; the CLI does."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..run.doctor import DoctorReport


def _status(ok: bool, good: str = "available", bad: str = "unavailable") -> Text:
    return Text(good, style="green") if ok else Text(bad, style="red")


def render(report: DoctorReport) -> Group:
    producers = Table("producer", "status", "reason", title="producers", title_justify="left")
    for check in report.producers:
        producers.add_row(check.name, _status(check.ok), check.detail)
    env = Table("what", "value", title="environment", title_justify="left", show_header=False)
    for name, version in report.versions:
        env.add_row(name, version)
    p = report.platform
    env.add_row("device", p.describe())
    env.add_row("architecture", p.arch)
    env.add_row("deployment FP8", f"{p.fp8.value} (e4m3fnuz on gfx94x, e4m3fn elsewhere)")
    env.add_row("auto baseline", report.auto_baseline)
    for check in report.triton_exact:
        env.add_row(Text.assemble(f"triton exact ({check.name}) ", _status(check.ok, "ok", "not ok")), check.detail)

    # the verdict line --quiet, Markdown and JUnit print: each unmet requirement, or what can run here
    return Group(producers, env, Text(report.verdict_line(), style="bold " + ("green" if report.passed else "red")))
