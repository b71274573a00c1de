"""The output formats every command writes: one entry per format, each a renderer from a run's outcomes
to text. The CLI builds `--json`, `--junit`, `--markdown`, `--html` from this table; adding a format (GitHub
annotations, SARIF) is one renderer module and one entry here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core.outcome import Outcomes
from . import html, json, junit, markdown


@dataclass(frozen=True)
class Format:
    name: str  # the option is --NAME PATH|-
    render: Callable[[Outcomes], str]
    help: str
    append: bool = False  # a file that collects several runs (a CI step summary)


FORMATS: tuple[Format, ...] = (
    Format("json", json.render, "Write the result as JSON; - writes it to stdout (the report then goes to stderr)."),
    Format("junit", junit.render, "Write a JUnit XML report (one testcase per case); - for stdout."),
    Format("markdown", markdown.render, "Append a Markdown summary to PATH (and to $GITHUB_STEP_SUMMARY whenever it"
                                        " is set); - for stdout.", append=True),
    Format("html", html.render, "Write a self-contained HTML report (maps of the differing bytes by cause, a gate's"
                                " cases as a grid, parity plots); - for stdout."),
)
BY_NAME = {f.name: f for f in FORMATS}
