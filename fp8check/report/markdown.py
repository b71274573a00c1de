"""A Markdown summary of a run, for `$GITHUB_STEP_SUMMARY` or `--markdown PATH`. Pure: outcomes in, text out."""

from __future__ import annotations

import re

from ..core.errors import printable
from ..core.outcome import Outcomes, Status

ICON = {Status.PASSED: "✅", Status.FAILED: "❌", Status.ERROR: "⚠️", Status.SKIPPED: "⏭️"}
MAX_PASSED_ROWS = 50  # larger gates list their failures and errors first, their passes folded (<details>)


def _cell(text: str | None) -> str:
    """Text in a table cell or a summary: no column break, no line break, no HTML (a writer's error text
    must not become a heading; no control character: errors.printable)."""
    escaped = (text or "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")
    return printable(escaped.replace("|", "\\|"))


def _code(text: str) -> str:
    """An inline code span that the text cannot close: delimited by more backticks than any run inside."""
    cell = _cell(text)
    longest = max((len(run) for run in re.findall(r"`+", cell)), default=0)
    tick, pad = "`" * (longest + 1), " " if longest else ""
    return f"{tick}{pad}{cell}{pad}{tick}"


def _fenced(text: str) -> list[str]:
    """A code block that text cannot close: its fence is longer than any run of backticks inside (CommonMark)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, printable(text, newlines=True), fence]


def _rows(outcomes) -> list[str]:
    return ["| | case | s | verdict | top cause |", "|---|---|---|---|---|",
            *(f"| {ICON[o.status]} | {_code(o.case_id)} | {o.seconds:.2f} | {_cell(o.verdict_line())} |"
              f" {_cell(o.top_cause())} |" for o in outcomes)]


def render(run: Outcomes) -> str:
    out = [f"### fp8check {_cell(run.title)}: {'PASS' if run.exit_code == 0 else 'FAIL'}", "", run.tally(), ""]
    folded = len(run.outcomes) > MAX_PASSED_ROWS
    shown = [o for o in run.outcomes if o.status is not Status.PASSED or not folded]
    passed_rows = [o for o in run.outcomes if o.status is Status.PASSED and folded]
    out += _rows(shown) if shown else []
    if passed_rows:  # every case is listed with its seconds; the passes of a large gate folded away
        out += ["", f"<details><summary>{len(passed_rows)} passed</summary>", "", *_rows(passed_rows), "", "</details>"]
    for o in run.outcomes:
        if o.status is not Status.PASSED:
            out += ["", f"<details><summary>{_cell(o.case_id)}</summary>", "", *_fenced(o.detail()), "", "</details>"]
    return "\n".join(out) + "\n"
