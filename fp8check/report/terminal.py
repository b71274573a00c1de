"""Terminal renderers: results to rich renderables. Nothing here prints; the CLI does."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..budget import BudgetVerdict
from ..compare import CompareResult
from ..diagnose import Diagnosis
from ..diff import BlockDiff, DiffResult
from ..spec import CacheSpec
from .causes import describe_example, explain

MAX_ROWS = 16  # larger caches show their differing blocks first, then one summary row


def percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def side_label(name: str, emulated: bool) -> str:
    return f"{name} (PyTorch emulation)" if emulated else name


def rows_to_show(diff: DiffResult, all_blocks: bool) -> list[BlockDiff]:
    """The blocks a table shows: all of them when few or asked for, else the first differing ones."""
    if all_blocks or diff.num_blocks <= MAX_ROWS:
        return diff.all_rows()
    differing = diff.block_diff().nonzero().view(-1)[:MAX_ROWS].cpu().tolist()
    return diff.rows(differing or range(MAX_ROWS))


def block_table(result: CompareResult, *, all_blocks: bool = False) -> Table:
    table = Table()
    table.add_column("block", justify="right")
    table.add_column("value bytes differ", justify="right")
    table.add_column("%", justify="right")
    table.add_column("scale bytes differ", justify="right")
    shown = rows_to_show(result.diff, all_blocks)
    for b in shown:
        style = "red" if b.diff else "green"
        table.add_row(
            str(b.block), Text(f"{b.value_diff} / {b.value_total}", style=style),
            percent(b.value_diff, b.value_total), Text(f"{b.scale_diff} / {b.scale_total}", style=style),
        )
    hidden = result.diff.num_blocks - len(shown)
    if hidden:
        differ = result.diff.differing_blocks - sum(1 for b in shown if b.diff)
        table.add_row("...", f"{hidden} more blocks, {differ} differ", "", "")
    return table


def verdict(result: CompareResult, budget: BudgetVerdict | None = None) -> Text:
    d = result.diff
    if d.identical:
        return Text(
            f"IDENTICAL: 0 of {d.total_bytes} bytes differ in {d.num_blocks} blocks",
            style="bold green",
        )
    text = (
        f"DIFFERENT: {d.diff_bytes} of {d.total_bytes} bytes differ ({percent(d.diff_bytes, d.total_bytes)}) "
        f"in {d.differing_blocks} of {d.num_blocks} blocks"
    )
    if d.guard_diff:
        text += f"; {d.guard_diff} bytes written outside the cache"
    style = "bold red"
    if budget is not None and not budget.budget.exact:
        text = f"{budget_line(budget)}\n{text}"
        style = "bold yellow" if budget.within else "bold red"
    if d.first_mismatch is not None:
        text += f"\nfirst mismatch: {d.first_mismatch.describe()}"
    return Text(text, style=style)


def budget_line(v: BudgetVerdict) -> str:
    """Whether the diff fits the budget, and which budget it exceeds."""
    b = v.budget
    parts = []
    if b.max_code_distance:
        worst = f", the farthest {v.worst_distance} apart" if v.worst_distance is not None else ""
        parts.append(f"{v.excused} value bytes excused as at most {b.max_code_distance} FP8 codes apart"
                     f" (--max-code-distance{worst})")
    parts.append(f"{v.counted} bytes counted against {v.allowed} allowed (--max-diff-bytes {b.max_diff_bytes},"
                 f" --max-diff-fraction {b.max_diff_fraction:g} of {v.total_bytes} bytes)")
    if v.within:
        return "WITHIN BUDGET: " + "; ".join(parts)
    return f"OVER BUDGET (exceeds {', '.join('--' + name for name in v.failed)}): " + "; ".join(parts)


def block_ranges(blocks: tuple[int, ...], limit: int = 6) -> str:
    """Block ids as ranges: (0, 1, 2, 5) -> '0-2, 5'; long lists end with the count."""
    if not blocks:
        return "outside the cache"
    ranges: list[list[int]] = []
    for block in blocks:
        if ranges and block == ranges[-1][1] + 1:
            ranges[-1][1] = block
        else:
            ranges.append([block, block])
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges[:limit])
    if len(ranges) > limit:
        shown += ", ..."
    return shown if len(blocks) == 1 else f"{shown} ({len(blocks)} blocks)"


def cause_table(diagnosis: Diagnosis, spec: CacheSpec, *, title: str = "causes") -> Table:
    """One row per cause, most bytes first: what was found, what to do, and one example."""
    table = Table(title=title, title_justify="left")
    table.add_column("cause")
    table.add_column("bytes", justify="right")
    table.add_column("blocks")
    table.add_column("why")
    for cause in diagnosis:
        explanation, hint = explain(cause, spec)
        why = Text(explanation)
        if hint:
            why.append(f"\nfix: {hint}", style="italic")
        if cause.examples:
            why.append(f"\ne.g. {describe_example(cause.category, cause.examples[0])}", style="dim")
        table.add_row(Text(cause.category.value, style="bold"), str(cause.bytes), block_ranges(cause.blocks), why)
    return table


def header(result: CompareResult) -> Text:
    """Who ran against whom, on what: printed above the table (not as its title, which wraps to its width)."""
    text = Text()
    text.append(side_label(result.baseline.name, result.baseline.emulated), style="bold")
    text.append(" vs ")
    text.append(side_label(result.candidate.name, result.candidate.emulated), style="bold")
    text.append(f"\n{result.spec.summary()}; {result.inputs.source}; on {result.device}")
    return text


def render_compare(result: CompareResult, *, all_blocks: bool = False, diagnosis: Diagnosis | None = None,
                   budget: BudgetVerdict | None = None) -> Group:
    parts = [header(result), block_table(result, all_blocks=all_blocks)]
    if diagnosis:
        parts.append(cause_table(diagnosis, result.spec))
    return Group(*parts, verdict(result, budget))


def baseline_title(name: str, emulated: bool) -> str:
    """How a table column names its baseline: honest about emulation."""
    if name == "aiter":
        return "C++ + shuffle_weight [real aiter]"
    if name == "reference":
        return "C++ + shuffle_weight [emulated]"
    return side_label(name, emulated)


def table_cell(b: BlockDiff) -> Text:
    text = f"{b.value_diff} / {b.value_total} differ ({percent(b.value_diff, b.value_total)})"
    if b.scale_diff:
        text += f" + {b.scale_diff} scale bytes"
    return Text(text, style="red" if b.diff else "green")


def render_seed_table(table, *, all_blocks: bool = False) -> Group:
    base = table.buggy.baseline
    against = baseline_title(base.name, base.emulated)
    grid = Table(title=Text(f"{table.buggy.spec.summary()}, {table.buggy.inputs.source}, on {table.buggy.device}"),
                 title_justify="left")
    grid.add_column("block", justify="right")
    grid.add_column(Text(f"BUGGY (uint8) vs {against}"), justify="right")  # Text: brackets are not markup
    grid.add_column(Text(f"FIXED (fp8 view) vs {against}"), justify="right")
    shown = rows_to_show(table.buggy.diff, all_blocks)
    fixed = table.fixed.diff.rows(b.block for b in shown)
    for b, f in zip(shown, fixed):
        grid.add_row(str(b.block), table_cell(b), table_cell(f))
    if len(shown) < table.buggy.diff.num_blocks:
        grid.add_row("...", f"{table.buggy.diff.num_blocks - len(shown)} more blocks", "")
    parts: list = [grid]
    for title, causes in (("BUGGY column", table.buggy_causes), ("FIXED column", table.fixed_causes)):
        if causes:
            parts.append(cause_table(causes, table.buggy.spec, title=f"causes, {title}"))
    if table.passed:
        line = Text("PASS: the fixed wrapper matches byte for byte; the buggy wrapper differs", style="bold green")
    elif not table.fixed.identical:
        line = Text(f"FAIL: the fixed wrapper differs in {table.fixed.diff.diff_bytes} bytes", style="bold red")
    else:
        line = Text("FAIL: the buggy wrapper matches too: this table cannot tell the two apart", style="bold red")
    return Group(*parts, line)
