"""The ecosystem matrix as text: one row per preset writer or reader, one column per (block_size, layout),
each cell what its runs came to (over FP8 formats, scale formats, input kinds and next_n). Pure: a
result in, renderables or a dict out."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text



def _writer_line(scale: str, runs: list[dict]) -> Text:
    """One scale format's runs (one per input kind): IDENTICAL, or the causes and how many inputs show them."""
    differ = [r for r in runs if r["status"] in ("different", "error")]
    if not differ:
        return Text(f"{scale}: IDENTICAL", style="green")
    causes = sorted({c for r in differ for c in (r["causes"] or ["error"] if r["status"] == "different" else ["error"])})
    share = "" if len(differ) == len(runs) else f" ({len(differ)}/{len(runs)} inputs)"
    expected = all(r.get("expect") == "different" for r in differ)
    return Text(f"{scale}: {', '.join(causes)}{share}", style="yellow" if expected else "red")


def _reader_line(next_n: int, run: dict) -> Text:
    if run["status"] == "pass":
        return Text(f"n{next_n}: agrees", style="green")
    if run["status"] == "error":
        return Text(f"n{next_n}: error", style="red")
    style = "yellow" if run.get("expect") == "different" else "red"
    causes = [f"recall {run['recall']:.3f}" if c == "recall" else c for c in run["causes"]]
    return Text(f"n{next_n}: FAULT {', '.join(causes)}", style=style)


def _cell(role: str, runs: list[dict]) -> Text:
    ran = [r for r in runs if r["status"] != "skipped"]
    if not ran:
        return Text("skipped", style="dim")
    lines = []
    if role == "writer":
        for scale in dict.fromkeys(r["scale_fmt"] for r in ran):
            lines.append(_writer_line(scale, [r for r in ran if r["scale_fmt"] == scale]))
    else:
        lines = [_reader_line(r["next_n"], r) for r in ran]
    return Text("\n").join(lines)


def render(result) -> Group:
    """Rows: each preset at each (block_size, layout); columns: the FP8 formats; a cell folds the scale
    formats and input kinds (writers) or next_n (readers)."""
    records = result.records
    formats = list(dict.fromkeys(r["fp8"] for r in records))
    table = Table(title=f"fp8check ecosystem: {len(records)} runs in {result.seconds:.0f} s", show_lines=True)
    for name in ("preset", "block"):
        table.add_column(name, no_wrap=True)
    for fp8 in formats:
        table.add_column(fp8)
    skipped: dict[str, str] = {}
    for preset, role in dict.fromkeys((r["preset"], r["role"]) for r in records):
        mine = [r for r in records if r["preset"] == preset and r["role"] == role]
        head = f"{role} {mine[0]['project']}/{mine[0]['name']}\n{mine[0]['project']} {mine[0]['version']}"
        for r in mine:
            if r["status"] == "skipped":
                skipped.setdefault(r["reason"], f"{mine[0]['project']}/{mine[0]['name']}")
        for block, layout in dict.fromkeys((r["block_size"], r["layout"]) for r in mine):
            runs = [r for r in mine if (r["block_size"], r["layout"]) == (block, layout)]
            cells = [_cell(role, [r for r in runs if r["fp8"] == fp8]) for fp8 in formats]
            if all(c.plain == "skipped" for c in cells):
                continue
            table.add_row(head, f"{block} {layout}", *cells)
            head = ""
    notes = [Text("skipped, with the reason:", style="bold")] if skipped else []
    notes += [Text(f"  {preset}: {reason}", style="dim") for reason, preset in skipped.items()]
    return Group(table, *notes, Text(result.verdict_line()))
