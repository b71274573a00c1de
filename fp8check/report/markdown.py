"""A Markdown summary of a run, for `$GITHUB_STEP_SUMMARY` or `--markdown PATH`. Pure: outcomes in, text out."""

from __future__ import annotations

from ..core.outcome import Outcomes, Status

ICON = {Status.PASSED: "✅", Status.FAILED: "❌", Status.ERROR: "⚠️", Status.SKIPPED: "⏭️"}
MAX_PASSED_ROWS = 50  # larger gates list their failures and errors, and count the passes


def _cell(text: str | None) -> str:
    """Text in a table cell or a summary: no column break, no line break, no HTML (a writer's error text
    must not become a heading)."""
    escaped = (text or "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace("|", "\\|").replace("\n", " ")


def render(run: Outcomes) -> str:
    passed, failed, errors = (run.count(s) for s in (Status.PASSED, Status.FAILED, Status.ERROR))
    head = "PASS" if run.exit_code == 0 else "FAIL"
    skipped = f", {run.count(Status.SKIPPED)} skipped" if run.count(Status.SKIPPED) else ""
    out = [f"### fp8check {run.title}: {head}", "",
           f"{passed} passed, {failed} failed, {errors} errors{skipped} of {run.selected} cases in {run.seconds:.1f} s",
           ""]
    shown = [o for o in run.outcomes if o.status is not Status.PASSED or len(run.outcomes) <= MAX_PASSED_ROWS]
    if shown:
        out += ["| | case | verdict | top cause |", "|---|---|---|---|"]
        out += [f"| {ICON[o.status]} | `{_cell(o.case_id)}` | {_cell(o.verdict_line())} | {_cell(o.top_cause())} |"
                for o in shown]
    for o in run.outcomes:
        if o.status is not Status.PASSED:
            out += ["", f"<details><summary>{_cell(o.case_id)}</summary>", "", "```", o.detail(), "```",
                    "", "</details>"]
    return "\n".join(out) + "\n"
