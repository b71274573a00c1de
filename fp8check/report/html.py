"""One self-contained HTML page of a run: the verdict, a gate's cases as a grid, and each case's section
with its result's views (maps, plots, tables: views.py, drawn by html_draw.py). Pure: outcomes in, text out.
No script, no network: styles and pictures are inline, so the page opens from a CI artifact or an e-mail."""

from __future__ import annotations

import html

from ..core.outcome import Outcome, Outcomes, Status
from .html_draw import draw
from .html_grid import outcomes_grid

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1400px }
h1 { font-size: 1.4em } h2 { font-size: 1.1em; word-break: break-all }
.verdict { font-family: monospace; padding: .4em .6em; border-left: 6px solid #999; background: #f7f7f7 }
.passed > .verdict, .verdict.passed { border-color: #2ca02c } .failed > .verdict, .verdict.failed { border-color: #d62728 }
.error > .verdict, .verdict.error { border-color: #ff7f0e } .skipped > .verdict { border-color: #aaa }
section.case { border-top: 1px solid #ddd; margin-top: 1.5em }
table { border-collapse: collapse; margin: .8em 0 } caption { text-align: left; font-weight: bold }
td, th { border: 1px solid #ddd; padding: .2em .5em; vertical-align: top; text-align: left }
table.grid td.cell { text-align: center; min-width: 1.6em; padding: 0 }
table.grid a { display: inline-block; min-width: 1.4em; text-decoration: none; color: #fff; font-weight: bold }
td.passed { background: #2ca02c } td.failed { background: #d62728 } td.error { background: #ff7f0e }
td.skipped { background: #bbb } td.known { background: #8c564b } td.mixed { background: #9467bd }
td.empty { background: #fff }
table.grid th.row { font-family: monospace; font-size: 12px; white-space: nowrap }
figure { margin: 1em 0 } figure svg { max-width: 100%; height: auto }
figure.cellmap { display: inline-block; width: 49%; min-width: 520px; vertical-align: top; margin: .5em 0 }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .3em 1.2em }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .3em; vertical-align: middle }
pre { background: #f7f7f7; padding: .6em; white-space: pre-wrap }
"""


def _anchor(i: int) -> str:
    return f"case-{i}"


def _section(outcome: Outcome, anchor: str, *, own_verdict: bool) -> str:
    """A case's section; a single command's page says its verdict once, at the top."""
    views = outcome.result.views() if outcome.result is not None else ()
    parts = [f'<section class="case {outcome.status.value}" id="{anchor}">',
             f"<h2>{html.escape(outcome.case_id)}</h2>"]
    if own_verdict:
        parts.append(f'<p class="verdict">{html.escape(outcome.verdict_line())}</p>')
    detail = outcome.detail()
    if detail and not views and outcome.status is not Status.PASSED:  # views show what the detail says
        parts.append(f"<pre>{html.escape(detail)}</pre>")
    parts += [draw(view, f"{anchor}-{getattr(view, 'name', '') or k}") for k, view in enumerate(views)]
    parts.append("</section>")
    return "\n".join(parts)


def render(run: Outcomes) -> str:
    head = "PASS" if run.exit_code == 0 else "FAIL"
    status = "passed" if run.exit_code == 0 else ("failed" if run.exit_code == 1 else "error")
    anchors = [_anchor(i) for i in range(len(run.outcomes))]
    sections = "\n".join(_section(o, a, own_verdict=run.batch) for o, a in zip(run.outcomes, anchors))
    matrix = outcomes_grid(run, anchors)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>fp8check {html.escape(run.title)}: {head}</title><style>{STYLE}</style></head>\n<body>"
            f"<h1>fp8check {html.escape(run.title)}</h1>"
            f'<p class="verdict {status}" id="verdict">{html.escape(run.verdict_line())}</p>\n'
            f"{draw(matrix, 'grid') if matrix else ''}\n{sections}\n</body></html>\n")
