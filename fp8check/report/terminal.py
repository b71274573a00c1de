"""Terminal renderers: results to rich renderables. Nothing here prints; the CLI does."""

from __future__ import annotations

from rich.console import Group
from rich.table import Column, Table
from rich.text import Text

from ..run.compare import CompareCheck, CompareResult
from ..diagnose import Diagnosis
from ..diagnose.example_words import describe_example
from ..diagnose.words import block_ranges, explain, percent
from ..core.diff import BlockDiff, DiffResult
from ..core.errors import printable
from ..core.spec import CacheSpec

MAX_ROWS = 16  # larger caches show their differing blocks first, then one summary row
# how a seed table's columns name their baseline: honest about emulation
BASELINE_TITLES = {"aiter": "C++ + shuffle_weight [real aiter]", "reference": "C++ + shuffle_weight [emulated]"}


def side_label(name: str, emulated: bool) -> str:
    """A producer's name on one line, whatever it holds (errors.printable)."""
    return printable(f"{name} (PyTorch emulation)" if emulated else name)


def rows_to_show(diff: DiffResult, all_blocks: bool) -> list[BlockDiff]:
    """The blocks a table shows: all of them when few or asked for; else the first MAX_ROWS/2 differing blocks
    and the MAX_ROWS/2 worst ones, in block order (the first blocks when none differs). Tensor work on the
    counts after one transfer to the host (16,384 counts: 0.13 MB; on a GPU, topk's first use costs more)."""
    if all_blocks or diff.num_blocks <= MAX_ROWS:
        return diff.all_rows()
    import torch

    per_block = diff.block_diff().cpu()
    first = per_block.nonzero().view(-1)[: MAX_ROWS // 2]
    worst = torch.topk(per_block, MAX_ROWS // 2).indices
    return diff.rows(sorted(set(torch.cat([first, worst[per_block[worst] > 0]]).tolist())) or range(MAX_ROWS))


class PlainLines:
    """Aligned plain lines for long tables (--all-blocks): rich's Table measures every cell, ~6.5 s for
    8,192 rows; segments take ~0.2 s. `lines`: per line, (text, style or None) pieces."""

    def __init__(self, header: str, lines: list[list[tuple[str, str | None]]]):
        self.header, self.lines = header, lines

    def __rich_console__(self, console, options):
        from rich.segment import Segment
        from rich.style import Style

        styles: dict = {}
        yield Segment(self.header, Style.parse("bold"))
        yield Segment.line()
        for pieces in self.lines:
            for text, style in pieces:
                yield Segment(text, styles.setdefault(style, Style.parse(style)) if style else None)
            yield Segment.line()


def block_lines(rows: list[BlockDiff]) -> PlainLines:
    header = f"{'block':>7}  {'value bytes differ':>19}  {'%':>6}  {'scale bytes differ':>18}"
    lines = []
    for b in rows:
        style = "red" if b.diff else "green"
        lines.append([(f"{b.block:>7}  ", None), (f"{b.value_diff:>9} / {b.value_total:<7}", style),
                      (f"  {percent(b.value_diff, b.value_total):>6}  ", None),
                      (f"{b.scale_diff:>8} / {b.scale_total:<7}", style)])
    return PlainLines(header, lines)


def block_table(result: CompareResult, *, all_blocks: bool = False) -> Table | PlainLines:
    shown = rows_to_show(result.diff, all_blocks)
    if len(shown) > 4 * MAX_ROWS:
        return block_lines(shown)
    table = Table(*(Column(name, justify="right") for name in ("block", "value bytes differ", "%",
                                                               "scale bytes differ")))
    for b in shown:
        style = "red" if b.diff else "green"
        table.add_row(str(b.block), Text(f"{b.value_diff} / {b.value_total}", style=style),
                      percent(b.value_diff, b.value_total), Text(f"{b.scale_diff} / {b.scale_total}", style=style))
    if hidden := result.diff.num_blocks - len(shown):
        differ = result.diff.differing_blocks - sum(1 for b in shown if b.diff)
        table.add_row("...", f"{hidden} more blocks, {differ} differ", "", "")
        table.caption = (f"the first {MAX_ROWS // 2} and the {MAX_ROWS // 2} worst differing blocks (--all-blocks: all)"
                         if result.diff.differing_blocks else f"the first {len(shown)} blocks (--all-blocks: all)")
    return table


def cause_table(diagnosis: Diagnosis, spec: CacheSpec, *, title: str = "causes") -> Table:
    """One row per cause, most bytes first: what was found, what to do, and one example."""
    table = Table("cause", Column("bytes", justify="right"), "blocks", "why", title=title, title_justify="left")
    for cause in diagnosis:
        explanation, hint = explain(cause, spec)
        why = Text(explanation)
        if hint:
            why.append(f"\nfix: {hint}", style="italic")
        if cause.examples:
            why.append(f"\ne.g. {describe_example(cause.category, cause.examples[0])}", style="dim")
        table.add_row(Text(cause.category.value, style="bold"), str(cause.bytes), block_ranges(cause.blocks), why)
    return table


def describe_provenance(provenance: dict) -> str:
    """What ran, from a side's provenance: function, file, git revision and commit, sha256, bound names ("" for
    built-in code, whose provenance at most says how its interpreted grids ran)."""
    if not provenance.keys() - {"interpreter"}:
        return ""
    if "recorded_by" in provenance:  # a golden file: what wrote its bytes, when that was code from a file
        recorded = describe_provenance(provenance["recorded_by"])
        return f"recorded by {recorded}" if recorded else ""
    text = f"{provenance.get('function', '?')} from {provenance.get('file', '?')}"
    if "revision" in provenance:  # a file read with git show
        text += f" at git {provenance['revision']} = {provenance['commit']}"
    elif "commit" in provenance:  # a checkout's commit (a source build: deepgemm-src)
        text += f" at commit {provenance['commit']}"
    text += f", sha256 {provenance.get('sha256', '?')}"
    if "wheel_sha256" in provenance:  # released code: its wheel, and whether a project table pinned that hash
        pinned = "pinned" if provenance.get("wheel_pinned") == "yes" else "UNPINNED: recorded, not checked"
        text += f", from {provenance.get('wheel', '?')} sha256 {provenance['wheel_sha256']} ({pinned})"
    if bound := provenance.get("bound"):
        text += "; bound: " + ", ".join(f"{name} = {what}" for name, what in bound.items())
    return text


def provenance_lines(pairs) -> Text:
    """One dim line per side that came from a file: `role: what ran`."""
    text = Text()
    for role, side in pairs:
        if described := describe_provenance(side.provenance):
            text.append(f"\n{role}: {described}", style="dim")
    return text


def interpreter_note(*results: CompareResult) -> list[Text]:
    """Next to the verdict on a CPU run of Triton kernels: why a compiled kernel could differ (if known; the
    first result's that has one)."""
    caveat = next((r.interpreter_caveat for r in results if r.interpreter_caveat), None)
    return [Text(f"note: {caveat}", style="yellow")] if caveat else []


def render_compare(check: CompareCheck, *, all_blocks: bool = False) -> Group:
    """Who ran against whom, on what (above the table, not its title, which wraps to its width); the blocks;
    the causes; the verdict (green identical, yellow within budget, red otherwise) and the first mismatch."""
    result, d = check.result, check.result.diff
    header = Text.assemble((side_label(result.baseline.name, result.baseline.emulated), "bold"), " vs ",
                           (side_label(result.candidate.name, result.candidate.emulated), "bold"),
                           f"\n{result.spec.summary()}; {result.inputs.source}; on {result.device}",
                           provenance_lines((("baseline", result.baseline), ("candidate", result.candidate))))
    parts = [header, block_table(result, all_blocks=all_blocks)]
    if check.diagnosis:
        parts.append(cause_table(check.diagnosis, result.spec))
    style = "bold green" if d.identical and check.passed else "bold yellow" if check.passed else "bold red"
    first = f"\nfirst mismatch: {d.first_mismatch.describe()}" if d.first_mismatch is not None else ""
    return Group(*parts, Text(check.verdict_line() + first, style=style), *interpreter_note(result))


def table_cell(b: BlockDiff) -> Text:
    text = f"{b.value_diff} / {b.value_total} differ ({percent(b.value_diff, b.value_total)})"
    if b.scale_diff:
        text += f" + {b.scale_diff} scale bytes"
    return Text(text, style="red" if b.diff else "green")


def render_seed_table(table, *, all_blocks: bool = False) -> Group:
    base = table.buggy.baseline
    against = BASELINE_TITLES.get(base.name) or side_label(base.name, base.emulated)
    grid_title = Text(f"{table.buggy.spec.summary()}, {table.buggy.inputs.source}, on {table.buggy.device}")
    grid_title.append(provenance_lines((("baseline", base), ("buggy", table.buggy.candidate),
                                        ("fixed", table.fixed.candidate))))
    grid = Table(*(Column(name, justify="right") for name in  # Text: brackets are not markup
                   ("block", Text(f"BUGGY (uint8) vs {against}"), Text(f"FIXED (fp8 view) vs {against}"))),
                 title=grid_title, title_justify="left")
    shown = rows_to_show(table.buggy.diff, all_blocks)
    fixed = table.fixed.diff.rows(b.block for b in shown)
    if len(shown) > 4 * MAX_ROWS:  # --all-blocks on a big cache: plain lines (see PlainLines)
        grid = PlainLines(f"{'block':>7}  BUGGY (uint8) | FIXED (fp8 view) vs {against}",
                          [[(f"{b.block:>7}  ", None), (table_cell(b).plain, "red" if b.diff else "green"),
                            (" | ", None), (table_cell(f).plain, "red" if f.diff else "green")]
                           for b, f in zip(shown, fixed)])
    else:
        for b, f in zip(shown, fixed):
            grid.add_row(str(b.block), table_cell(b), table_cell(f))
    if len(shown) < table.buggy.diff.num_blocks:
        grid.add_row("...", f"{table.buggy.diff.num_blocks - len(shown)} more blocks", "")
    parts: list = [grid] if isinstance(grid, Table) else [grid_title, grid]
    for title, causes in (("BUGGY column", table.buggy_causes), ("FIXED column", table.fixed_causes)):
        if causes:
            parts.append(cause_table(causes, table.buggy.spec, title=f"causes, {title}"))
    line = Text(table.verdict_line(), style="bold green" if table.passed else "bold red")
    return Group(*parts, line, *interpreter_note(table.fixed, table.buggy))
