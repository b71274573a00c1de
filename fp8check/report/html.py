"""One self-contained HTML page of a run (docs/html.md): the verdict, a gate's cases as a grid, each case's
section with its result's views (views.py). Maps and plots are drawn by matplotlib's SVG backend, imported only
when a report is drawn. A map is one image whose every pixel is one cell (`imshow`, no interpolation: the SVG
keeps the cells' colours exactly); its <figure> says the cell counts per category (data-counts)."""

from __future__ import annotations

import html
import io
import json
import re
from collections import Counter

from ..core.errors import plural
from ..core.outcome import Outcome, Outcomes, Status
from ..core.views import Cell, CellMap, Curves, Grid, Table

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

NONE_COLOUR = "#f0f0f0"  # a cell with no differing byte
# one colour per category, in legend order (matplotlib's tab20, pairs split so that neighbours differ)
PALETTE = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
           "#f7b6d2", "#9edae5", "#dbdb8d", "#393b79")


def colour(k: int) -> str:
    """The colour of category legend[k]."""
    return PALETTE[k % len(PALETTE)]


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))


def _svg(figure, name: str) -> str:
    """The figure as inline SVG: text as text (no embedded font), ids salted by the view's name so that
    several SVGs in one page never share one, no metadata (no date: the same report twice is the same bytes)."""
    import matplotlib

    out = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        figure.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = out.getvalue()
    return re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], count=1, flags=re.DOTALL)


def _cells_rgb(view: CellMap):
    """uint8 [rows, columns, 4]: each cell's colour; heat maps lighten a category's colour where few bytes
    differ; cells past `used` are transparent."""
    import numpy as np

    codes = np.frombuffer(view.codes, dtype=np.uint8)
    table = np.array([_rgb(NONE_COLOUR)] + [_rgb(colour(k)) for k in range(len(view.legend))], dtype=np.float64)
    rgb = table[codes]
    if view.shade:
        strength = 0.25 + 0.75 * np.clip(np.asarray(view.shade), 0.0, 1.0)[:, None]
        white = np.full(3, 255.0)
        rgb = np.where(codes[:, None] > 0, white + (rgb - white) * strength, rgb)
    alpha = np.full((codes.size, 1), 255.0)
    alpha[view.used:] = 0
    return np.concatenate([np.rint(rgb), alpha], axis=1).astype(np.uint8).reshape(view.rows, view.columns, 4)


def cell_map(view: CellMap, anchor: str) -> str:
    """A map as a <figure>: the picture, its legend (categories shown, with their cell counts), its caption."""
    from matplotlib.figure import Figure

    height = min(6.5, max(1.8, 1.0 + 5.5 * view.rows / view.columns))
    figure = Figure(figsize=(6.5, height))  # inches; two maps side by side in a wide window
    axes = figure.add_subplot()
    axes.imshow(_cells_rgb(view), interpolation="none", aspect="auto")
    for column, label in view.column_marks:
        if column:
            axes.axvline(column - 0.5, color="black", linewidth=0.8)
        axes.text(column, -0.8, label, fontsize=8, va="bottom")
    if view.row_step:
        for row in range(view.row_step, view.rows, view.row_step):
            axes.axhline(row - 0.5, color="black", linewidth=0.4, alpha=0.5)
    axes.set_xlabel(view.column_label, fontsize=8)
    axes.set_ylabel(view.row_label, fontsize=8)
    axes.tick_params(labelsize=7)
    counts = view.counts()
    colours = {name: colour(k) for k, name in enumerate(view.legend) if name in counts}
    legend = "".join(f'<li><span class="swatch" style="background:{colours[name]}"></span>{html.escape(name)}'
                     f" ({plural(n, 'block' if view.shade else 'byte')})</li>" for name, n in counts.items())
    data = (f' data-rows="{view.rows}" data-columns="{view.columns}" data-cells="{view.used}"'
            f" data-counts='{html.escape(json.dumps(counts))}' data-colours='{html.escape(json.dumps(colours))}'"
            f' data-none="{NONE_COLOUR}"')
    return (f'<figure class="cellmap" id="{anchor}"{data}><figcaption><b>{html.escape(view.title)}</b>'
            f" {html.escape(view.caption)}</figcaption>{_svg(figure, anchor)}"
            f'<ul class="legend">{legend or "<li>no differing byte</li>"}</ul></figure>')


def curves(view: Curves, anchor: str) -> str:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.5, 3.2))
    axes = figure.add_subplot()
    if view.shaded:
        axes.axvspan(min(view.shaded), max(view.shaded), color="#dddddd", label=view.shaded_label)
    for k, series in enumerate(view.series):
        style = "--" if series.note else "-"
        label = f"{series.name} ({series.note})" if series.note else series.name
        axes.plot(series.x, series.y, style, marker="o", color=colour(k + 1), label=label)
    if view.log_x:
        axes.set_xscale("log", base=2)
    axes.set(ylim=(-0.03, 1.03), xlabel=view.x_label, ylabel=view.y_label)
    axes.set_title(view.title, fontsize=10)
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return (f'<figure class="curves" id="{anchor}" data-series="{len(view.series)}">'
            f"{_svg(figure, anchor)}</figure>")


def table(view: Table, anchor: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in view.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in view.rows)
    return (f'<table id="{anchor}"><caption>{html.escape(view.title)}</caption><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


KEY = "✓ passed, ✗ failed, ! error, – skipped, ≠ a declared difference that shows; a cell's tooltip says more"


def grid(view: Grid, anchor: str) -> str:
    """An HTML table (its cells are links), each cell coloured by its case's tone."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in view.columns)
    body = []
    for label, cells in view.rows:
        tds = []
        for column in cells:
            links = "".join(
                f'<a class="{c.tone}"' + (f' href="{html.escape(c.href, quote=True)}"' if c.href else "")
                + f' title="{html.escape(c.title, quote=True)}">{html.escape(c.symbol)}</a>' for c in column)
            tones = {c.tone for c in column}
            tone = next(iter(tones)) if len(tones) == 1 else ("mixed" if tones else "empty")
            tds.append(f'<td class="cell {tone}">{links}</td>')
        body.append(f'<tr><th class="row">{html.escape(label)}</th>{"".join(tds)}</tr>')
    notes = "".join(f"<li>{html.escape(note)}</li>" for note in (*view.notes, KEY))
    return (f'<table class="grid" id="{anchor}"><caption>{html.escape(view.title)}</caption>'
            f'<thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            + f'<ul class="skips">{notes}</ul>')


DRAW = {CellMap: cell_map, Curves: curves, Grid: grid, Table: table}  # the one place that tells views apart
SYMBOL = {Status.PASSED: "✓", Status.FAILED: "✗", Status.ERROR: "!", Status.SKIPPED: "–"}


def outcomes_grid(run: Outcomes, anchors: list[str]) -> Grid | None:
    """A gate's cases as a grid (anchors: each case's section), why cases were skipped under it; None where
    the cases say nothing of their parameters (a single command). A declared difference that still shows (a
    passing case with a reason) is `known`, apart from the cases that pass by being the same."""
    if not any(o.axes for o in run.outcomes):
        return None
    tones = [("known", "≠") if o.status is Status.PASSED and o.reason else (o.status.value, SYMBOL[o.status])
             for o in run.outcomes]
    cases = [(dict(o.axes), Cell(*tone, f"{o.case_id}: {o.verdict_line()}", f"#{a}"))
             for o, a, tone in zip(run.outcomes, anchors, tones)]
    reasons = Counter(o.error or "" for o in run.outcomes if o.status is Status.SKIPPED)
    return Grid.of("grid", cases, tuple(f"{n} skipped: {reason}" for reason, n in reasons.items()))


def _section(outcome: Outcome, anchor: str, *, own_verdict: bool) -> str:
    """A case's section; a single command's page says its verdict once, at the top."""
    views = outcome.result.views() if outcome.result is not None else ()
    parts = [f'<section class="case {outcome.status.value}" id="{anchor}">', f"<h2>{html.escape(outcome.case_id)}</h2>"]
    if own_verdict:
        parts.append(f'<p class="verdict">{html.escape(outcome.verdict_line())}</p>')
    detail = outcome.detail()
    if detail and not views and outcome.status is not Status.PASSED:  # views show what the detail says
        parts.append(f"<pre>{html.escape(detail)}</pre>")
    parts += [DRAW[type(view)](view, f"{anchor}-{getattr(view, 'name', '') or k}") for k, view in enumerate(views)]
    parts.append("</section>")
    return "\n".join(parts)


def render(run: Outcomes) -> str:
    head = "PASS" if run.exit_code == 0 else "FAIL"
    status = "passed" if run.exit_code == 0 else ("failed" if run.exit_code == 1 else "error")
    anchors = [f"case-{i}" for i in range(len(run.outcomes))]
    sections = "\n".join(_section(o, a, own_verdict=run.batch) for o, a in zip(run.outcomes, anchors))
    matrix = outcomes_grid(run, anchors)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>fp8check {html.escape(run.title)}: {head}</title><style>{STYLE}</style></head>\n<body>"
            f"<h1>fp8check {html.escape(run.title)}</h1>"
            f'<p class="verdict {status}" id="verdict">{html.escape(run.verdict_line())}</p>\n'
            f"{grid(matrix, 'grid') if matrix else ''}\n{sections}\n</body></html>\n")
