"""A Markdown summary of a gate or a single command, for `$GITHUB_STEP_SUMMARY` or `--markdown PATH`.
Pure: a gate result in, text out."""

from __future__ import annotations

from ..gate import GateResult, Status
from . import lines

ICON = {Status.PASSED: "✅", Status.FAILED: "❌", Status.ERROR: "⚠️", Status.SKIPPED: "⏭️"}
MAX_PASSED_ROWS = 50  # larger gates list their failures and errors, and count the passes


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def gate_markdown(result: GateResult, *, title: str) -> str:
    passed, failed, errors = (result.count(s) for s in (Status.PASSED, Status.FAILED, Status.ERROR))
    head = "PASS" if result.exit_code == 0 else "FAIL"
    skipped = f", {result.count(Status.SKIPPED)} skipped" if result.count(Status.SKIPPED) else ""
    out = [f"### fp8check {title}: {head}", "",
           f"{passed} passed, {failed} failed, {errors} errors{skipped} of {result.selected} cases in {result.seconds:.1f} s",
           ""]
    shown = [o for o in result.outcomes if o.status is not Status.PASSED or len(result.outcomes) <= MAX_PASSED_ROWS]
    if shown:
        out += ["| | case | verdict | top cause |", "|---|---|---|---|"]
        out += [f"| {ICON[o.status]} | `{_cell(o.case_id)}` | {_cell(lines.verdict(o))} | {_cell(lines.cause(o))} |"
                for o in shown]
    for o in result.outcomes:
        if o.status is not Status.PASSED:
            out += ["", f"<details><summary>{_cell(o.case_id)}</summary>", "", "```", lines.detail(o), "```",
                    "", "</details>"]
    return "\n".join(out) + "\n"
