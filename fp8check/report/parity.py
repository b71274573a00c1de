"""Renderers of `fp8check parity`: a rich table shaped like the seed's second table, and JSON records.
Nothing here prints or writes; the CLI does."""

from __future__ import annotations

import math

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..device import versions
from ..parity import Column, ParityResult
from ..readers.metrics import Metrics
from .terminal import describe_provenance, side_label


def fraction(x: float) -> str:
    """3 decimals, with more where a value below 1 would otherwise print as 1.000."""
    digits = 3
    while x < 1 and f"{x:.{digits}f}" == "1." + "0" * digits and digits < 9:
        digits += 1
    return f"{x:.{digits}f}"


def rel(x: float) -> str:
    return "nan" if math.isnan(x) else ("0" if x == 0 else f"{x:.1e}")


def _recall_cell(m: Metrics, min_recall: float) -> Text:
    if m.vacuous:
        return Text(fraction(m.recall), style="dim")
    return Text(fraction(m.recall), style="green" if m.recall >= min_recall else "red")


def _title(result: ParityResult) -> Text:
    c = result.config
    text = Text()
    text.append(f"top-{c.topk} parity", style="bold")
    text.append(f": {result.spec.summary()}; {result.source}; next_n {c.next_n}; on {result.device}\n")
    text.append("truth: ")
    text.append(side_label(result.baseline.name, result.baseline.emulated), style="bold")
    text.append("'s bytes through fp8check's reference reader (float64); reader: ")
    text.append(result.reader.name, style="bold")
    ran = describe_provenance(result.reader.provenance)  # a reader from a file: what ran (its child reported it)
    if ran:
        text.append(f"\nreader: {ran}", style="dim")
    return text


def _cells(result: ParityResult, i: int, ctx: int) -> list:
    c = result.config
    cells: list = [str(ctx)]
    for col in result.columns:
        m = col.rows[i]
        cells += [_recall_cell(m, c.min_recall), fraction(m.positional), rel(m.max_rel), f"{m.bad}/{m.n}"]
    if result.reader_check is not None:
        m = result.reader_check[i]
        cells += [_recall_cell(m, c.min_recall), rel(m.max_rel)]
    cells.append(Text("vacuous", style="dim") if c.vacuous(ctx) else "")
    return cells


def table(result: ParityResult) -> Table:
    k = result.config.topk
    headers: list = ["ctx"]
    for col in result.columns:
        headers += [Text(f"{col.name}\nrecall @{k}"), f"positional @{k}", "max_rel", "bad/N"]
    if result.reader_check is not None:
        headers += [Text(f"reader check recall @{k}"), "max_rel"]
    headers.append("vacuous")
    rows = [_cells(result, i, ctx) for i, ctx in enumerate(result.config.ctx)]
    grid = Table(box=box.SIMPLE_HEAD, collapse_padding=True)
    for j, header in enumerate(headers):  # numbers keep their width; headers wrap on narrow terminals
        words = str(header).split()  # a header word up to 16 wide stays whole (long file: names fold)
        width = max([len(str(row[j])) for row in rows] + [min(16, max(len(w) for w in words))])
        grid.add_column(header, justify="left" if header == "vacuous" else "right", min_width=width, overflow="fold")
    for row in rows:
        grid.add_row(*row)
    return grid


def _worst(failing: list[tuple[int, float]]) -> str:
    ctx, recall = min(failing, key=lambda item: item[1])
    return f"lowest recall {fraction(recall)} at ctx {ctx}, {len(failing)} row(s) below the bar"


def _column_line(col: Column, result: ParityResult) -> Text:
    c = result.config
    failing = col.failing(c)
    bar = f"recall@{c.topk} >= {c.min_recall:g} on every non-vacuous row"
    if not failing:
        if col.expect_fail:
            return Text(f"{col.name}: expected to fail (--expect-fail) but passes: {bar}", style="yellow")
        return Text(f"{col.name}: PASS, {bar}", style="green")
    style = "yellow" if col.expect_fail else "red"
    expected = ", as expected (--expect-fail)" if col.expect_fail else ""
    return Text(f"{col.name}: FAIL{expected}: {_worst(failing)}", style=style)


def notes(result: ParityResult) -> list[Text]:
    c = result.config
    lines = []
    if any(c.vacuous(ctx) for ctx in c.ctx):
        lines.append(Text(
            f"vacuous rows: every query row sees <= K = {c.topk} tokens, so every token is selected and any"
            f" writer scores recall 1.000 there (this is why the seed's bug hid below ctx {c.topk + 1});"
            " pick a smaller --topk to test those lengths.", style="dim"))
    if result.all_vacuous:
        lines.append(Text(f"every row is vacuous (ctx <= K = {c.topk}): recall cannot tell these writers apart;"
                          " the verdict below says nothing about them.", style="bold yellow"))
    lines += obligation_lines(result)
    if result.reader_check is not None:
        worst = max((m.max_rel for m in result.reader_check), key=lambda x: (math.isnan(x), x))
        if result.reader_disagreements:
            lines.append(Text(
                f"READER FAULT: reader {result.reader.name!r} disagrees with fp8check's reference reader on the"
                f" baseline's own bytes ({_worst(result.reader_disagreements)}; max_rel {rel(worst)}): it reads a"
                f" different layout or format from the one written ({result.spec.layout.value} layout,"
                f" {result.spec.fp8.value}). The writer columns measure the reader, not the writers.",
                style="bold red"))
        elif result.reader_ties:
            ties = ", ".join(f"ctx {ctx}: recall {recall:.4f}, {missed} missed" for ctx, recall, missed in result.reader_ties)
            lines.append(Text(
                f"reader {result.reader.name!r} misses the truth's top-{c.topk} only by near-ties on the baseline's"
                f" bytes ({ties}): every token it selects wrongly has a true logit within atol + rtol * |L| of the"
                f" K-th (rtol {c.rtol:g}, atol {c.atol:g}); its rounding reorders near-equal tokens, it reads the"
                " right bytes. Not a reader fault.", style="yellow"))
        elif not result.obligations.broken:
            lines.append(Text(
                f"reader {result.reader.name!r} agrees with the reference reader on the baseline's bytes"
                f" (recall@{c.topk} >= {c.min_recall:g} on every non-vacuous row; max_rel up to {rel(worst)}).",
                style="green"))
    lines += [_column_line(col, result) for col in result.columns]
    lines.append(Text(
        f"recall@K: share of the writer's K selected tokens whose true logit is >= the true K-th largest (ties"
        f" count); positional@K: positions where the two ascending-sorted top-K index lists agree (the seed's"
        f" numbers; never a verdict); max_rel = max|L-L*| / max|L*|; bad/N: tokens with |L-L*| > atol + rtol|L*|"
        f" (rtol {c.rtol:g}, atol {c.atol:g}), NaN counts as bad.", style="dim"))
    return lines


def obligation_lines(result: ParityResult) -> list[Text]:
    """READER FAULT lines for masked positions that are not -inf and writes outside the output rows."""
    found, lines = result.obligations, []
    if found.leaks:
        lines.append(Text(
            f"READER FAULT: reader {result.reader.name!r} returns {found.leaks} logits at positions a query row may"
            f" not see (they must be -inf; row n of next_n sees positions up to ctx - next_n + n): "
            + "; ".join(x.describe() for x in found.leaked), style="bold red"))
    if found.outside:
        rows = result.config.next_n * len(result.config.ctx)
        lines.append(Text(
            f"READER FAULT: reader {result.reader.name!r} wrote {found.outside} elements outside its output rows: "
            + "; ".join(x.describe(rows, result.config.max_ctx) for x in found.written), style="bold red"))
    return lines


def render(result: ParityResult) -> Group:
    verdict = Text("PASS", style="bold green") if result.passed else Text("FAIL", style="bold red")
    return Group(_title(result), table(result), *notes(result), verdict)


def _record(ctx: int, writer: str, m: Metrics) -> dict:
    """One (ctx, writer) record; a max_rel that is not finite (a NaN or inf logit) is null."""
    record = {"ctx": ctx, "writer": writer, **m.to_dict()}
    if not math.isfinite(record["max_rel"]):
        record["max_rel"] = None
    return record


def to_json(result: ParityResult) -> dict:
    c = result.config
    records = [_record(ctx, col.name, m) for col in result.columns for ctx, m in zip(c.ctx, col.rows)]
    check = None
    if result.reader_check is not None:
        check = [_record(ctx, result.baseline.name, m) for ctx, m in zip(c.ctx, result.reader_check)]
    return {
        "spec": result.spec.to_dict(),
        "inputs": {"source": result.source, "heads": result.heads, "tokens": c.max_ctx},
        "config": c.to_dict(),
        "baseline": {"name": result.baseline.name, "description": result.baseline.description,
                     "emulated": result.baseline.emulated},
        "writers": [{"name": col.name, "description": col.description, "emulated": col.emulated,
                     "expect_fail": col.expect_fail, "passed": not col.failing(c)} for col in result.columns],
        "reader": {"name": result.reader.name, "description": result.reader.description,
                   "exact": result.reader.exact, "provenance": result.reader.provenance},
        "records": records,
        "reader_check": check,
        "reader_fault": result.reader_fault,
        "reader_obligations": result.obligations.to_dict(),
        "reader_ties": [{"ctx": ctx, "recall": recall, "missed": missed} for ctx, recall, missed in result.reader_ties],
        "passed": result.passed,
        "device": result.device,
        "timings_s": result.timings,
        "versions": versions(),
    }
