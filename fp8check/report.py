"""Renderers: results to rich renderables and to JSON-ready dicts. Nothing here prints."""

from __future__ import annotations

from importlib import metadata

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .compare import CompareResult
from .diff import BlockDiff

MAX_ROWS = 16  # larger caches show their differing blocks first, then one summary row


def versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "triton", "fp8check"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    try:  # the imported torch may not be the installed distribution (a source build, a device image)
        import torch

        out["torch"] = torch.__version__
    except ImportError:
        pass
    return out


def percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def side_label(name: str, emulated: bool) -> str:
    return f"{name} (PyTorch emulation)" if emulated else name


def rows_to_show(blocks: tuple[BlockDiff, ...], all_blocks: bool) -> list[BlockDiff]:
    if all_blocks or len(blocks) <= MAX_ROWS:
        return list(blocks)
    differing = [b for b in blocks if b.diff]
    return (differing or list(blocks))[:MAX_ROWS]


def block_table(result: CompareResult, *, all_blocks: bool = False) -> Table:
    table = Table()
    table.add_column("block", justify="right")
    table.add_column("value bytes differ", justify="right")
    table.add_column("%", justify="right")
    table.add_column("scale bytes differ", justify="right")
    shown = rows_to_show(result.diff.blocks, all_blocks)
    for b in shown:
        style = "red" if b.diff else "green"
        table.add_row(
            str(b.block), Text(f"{b.value_diff} / {b.value_total}", style=style),
            percent(b.value_diff, b.value_total), Text(f"{b.scale_diff} / {b.scale_total}", style=style),
        )
    hidden = [b for b in result.diff.blocks if b not in shown]
    if hidden:
        differ = sum(1 for b in hidden if b.diff)
        table.add_row("...", f"{len(hidden)} more blocks, {differ} differ", "", "")
    return table


def verdict(result: CompareResult) -> Text:
    d = result.diff
    if d.identical:
        return Text(
            f"IDENTICAL: 0 of {d.total_bytes} bytes differ in {len(d.blocks)} blocks",
            style="bold green",
        )
    blocks = sum(1 for b in d.blocks if b.diff)
    text = (
        f"DIFFERENT: {d.diff_bytes} of {d.total_bytes} bytes differ ({percent(d.diff_bytes, d.total_bytes)}) "
        f"in {blocks} of {len(d.blocks)} blocks"
    )
    if d.guard_diff:
        text += f"; {d.guard_diff} bytes written outside the cache"
    if d.first_mismatch is not None:
        text += f"\nfirst mismatch: {d.first_mismatch.describe()}"
    return Text(text, style="bold red")


def header(result: CompareResult) -> Text:
    """Who ran against whom, on what: printed above the table (not as its title, which wraps to its width)."""
    text = Text()
    text.append(side_label(result.baseline.name, result.baseline.emulated), style="bold")
    text.append(" vs ")
    text.append(side_label(result.candidate.name, result.candidate.emulated), style="bold")
    text.append(f"\n{result.spec.summary()}; {result.inputs.source}; on {result.device}")
    return text


def render_compare(result: CompareResult, *, all_blocks: bool = False) -> Group:
    return Group(header(result), block_table(result, all_blocks=all_blocks), verdict(result))


def compare_json(result: CompareResult) -> dict:
    d = result.diff
    return {
        "spec": result.spec.to_dict(),
        "baseline": result.baseline.name,
        "candidate": result.candidate.name,
        "baseline_emulated": result.baseline.emulated,
        "candidate_emulated": result.candidate.emulated,
        "inputs": result.inputs.source,
        "device": result.device,
        "blocks": [
            {"block": b.block, "value_diff": b.value_diff, "value_total": b.value_total,
             "scale_diff": b.scale_diff, "scale_total": b.scale_total}
            for b in d.blocks
        ],
        "guard_diff": d.guard_diff,
        "diff_bytes": d.diff_bytes,
        "total_bytes": d.total_bytes,
        "identical": d.identical,
        "first_mismatch": d.first_mismatch.to_dict() if d.first_mismatch else None,
        "timings_s": result.timings,
        "versions": versions(),
    }


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
    shown = rows_to_show(table.buggy.diff.blocks, all_blocks)
    for b in shown:
        grid.add_row(str(b.block), table_cell(b), table_cell(table.fixed.diff.blocks[b.block]))
    if len(shown) < len(table.buggy.diff.blocks):
        grid.add_row("...", f"{len(table.buggy.diff.blocks) - len(shown)} more blocks", "")
    if table.passed:
        line = Text("PASS: the fixed wrapper matches byte for byte; the buggy wrapper differs", style="bold green")
    elif not table.fixed.identical:
        line = Text(f"FAIL: the fixed wrapper differs in {table.fixed.diff.diff_bytes} bytes", style="bold red")
    else:
        line = Text("FAIL: the buggy wrapper matches too: this table cannot tell the two apart", style="bold red")
    return Group(grid, line)


def seed_table_json(table) -> dict:
    def column(result: CompareResult) -> dict:
        payload = compare_json(result)
        return {key: payload[key] for key in ("candidate", "blocks", "diff_bytes", "identical", "first_mismatch")}

    base = compare_json(table.buggy)
    return {
        "spec": base["spec"], "baseline": base["baseline"], "baseline_emulated": base["baseline_emulated"],
        "inputs": base["inputs"], "device": base["device"],
        "buggy": column(table.buggy), "fixed": column(table.fixed), "passed": table.passed,
        "versions": base["versions"],
    }
