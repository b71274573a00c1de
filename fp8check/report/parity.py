"""Terminal renderer of `fp8check parity`: a rich table shaped like the seed's second table, its notes
and the verdict. Nothing here prints; the CLI does."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..run.parity import ParityResult, fraction, rel
from ..core.metrics import Metrics
from .terminal import provenance_lines, side_label


def _recall_cell(m: Metrics, min_recall: float) -> Text:
    style = "dim" if m.vacuous else "green" if m.recall >= min_recall else "red"
    return Text(fraction(m.recall), style=style)


def _title(result: ParityResult) -> Text:
    c = result.config
    # code from files: what ran (an isolated one's child reported it)
    ran = provenance_lines((("baseline", result.baseline), ("reader", result.reader),
                            *(("writer", col) for col in result.columns)))
    return Text.assemble((f"top-{c.topk} parity", "bold"),
                         f": {result.spec.summary()}; {result.source}; next_n {c.next_n}; on {result.device}\n",
                         "truth: ", (side_label(result.baseline.name, result.baseline.emulated), "bold"),
                         "'s bytes through fp8check's reference reader (float64); reader: ",
                         (result.reader.name, "bold"), ran)


def _groups(result: ParityResult) -> list[tuple[list, list]]:
    """(headers, per-row cells) of each writer's columns, then the reader check's."""
    c, k = result.config, result.config.topk
    groups = []
    for col in result.columns:
        groups.append(([Text(f"{col.name}\nrecall @{k}"), f"positional @{k}", "max_rel", "bad/N"],
                       [[_recall_cell(m, c.min_recall), fraction(m.positional), rel(m.max_rel), f"{m.bad}/{m.n}"]
                        for m in col.rows]))
    if result.reader_check is not None:
        groups.append(([Text(f"reader check recall @{k}"), "max_rel"],
                       [[_recall_cell(m, c.min_recall), rel(m.max_rel)] for m in result.reader_check]))
    return groups


def _grid(result: ParityResult, groups: list[tuple[list, list]]) -> Table:
    c = result.config
    headers = ["ctx", *(h for hs, _ in groups for h in hs), "vacuous"]
    rows = [[str(ctx), *(cell for _, cells in groups for cell in cells[i]),
             Text("vacuous", style="dim") if c.vacuous(ctx) else ""] for i, ctx in enumerate(c.ctx)]
    grid = Table(box=box.SIMPLE_HEAD, collapse_padding=True)
    for j, header in enumerate(headers):  # numbers keep their width; headers wrap on narrow terminals
        words = str(header).split()  # a header word up to 16 wide stays whole (long file: names fold)
        width = max([len(str(row[j])) for row in rows] + [min(16, max(len(w) for w in words))])
        grid.add_column(header, justify="left" if header == "vacuous" else "right", min_width=width, overflow="fold")
    for row in rows:
        grid.add_row(*row)
    return grid


class _Wrapped:
    """The whole table where it fits the output's width (a CI log: 80 columns), else one table per writer:
    columns are never cut off."""

    def __init__(self, result: ParityResult):
        groups = _groups(result)
        self.whole = _grid(result, groups)
        self.parts = [_grid(result, [group]) for group in groups]

    def __rich_console__(self, console, options):
        needed = sum(column.min_width + 2 for column in self.whole.columns)  # each cell padded by one space a side
        if needed <= options.max_width or len(self.parts) < 2:
            yield self.whole
        else:
            yield from self.parts


TONE = {"info": "dim", "warn": "bold yellow", "pass": "green", "fail": "bold red", "expected": "yellow"}


def render(result: ParityResult) -> Group:
    verdict = Text(result.verdict_line(), style="bold green" if result.passed else "bold red")
    notes = [Text(note.text, style=TONE[note.tone]) for note in result.notes()]
    return Group(_title(result), _Wrapped(result), *notes, verdict)
