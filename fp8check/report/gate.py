"""Terminal renderer of a gate: one line per case, the detail of every case that did not pass, the verdict.
Nothing here prints; the CLI does."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from ..core.errors import printable
from ..core.outcome import Outcomes, Status

STYLE = {Status.PASSED: "green", Status.FAILED: "bold red", Status.ERROR: "bold magenta", Status.SKIPPED: "yellow"}
LABEL = {Status.PASSED: "PASS ", Status.FAILED: "FAIL ", Status.ERROR: "ERROR", Status.SKIPPED: "SKIP "}


def render_gate(run: Outcomes) -> Group:
    parts: list = []
    for o in run.outcomes:
        line = Text(LABEL[o.status], style=STYLE[o.status])
        line.append(f" {o.seconds:6.2f} s  {printable(o.case_id)}")  # one line whatever a name holds
        parts.append(line)
    for o in run.outcomes:
        if o.status is not Status.PASSED:
            parts.append(Text(f"\n{printable(o.case_id)}", style="bold"))
            parts.append(Text(printable(o.verdict_line()), style=STYLE[o.status]))
            if o.error is None:
                parts.append(Text(o.detail()))
    parts.append(Text(run.verdict_line(), style="bold green" if run.exit_code == 0 else "bold red"))
    return Group(*parts)
