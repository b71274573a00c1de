"""The ecosystem matrix as text: one row per preset writer or reader, one column per (block_size, layout),
each cell what its runs came to (over FP8 formats, scale formats, input kinds and next_n). Pure: a
result in, renderables or a dict out."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

SHORT_FP8 = {"e4m3fn": "fn", "e4m3fnuz": "fnuz"}


def _columns(records) -> list[tuple[int, str]]:
    seen = []
    for r in records:
        key = (r["block_size"], r["layout"])
        if key not in seen:
            seen.append(key)
    return sorted(seen, key=lambda k: (k[0], k[1]))


def _writer_cell(runs: list[dict]) -> Text:
    ran = [r for r in runs if r["status"] != "skipped"]
    if not ran:
        return Text("skipped", style="dim")
    same = sum(r["status"] == "identical" for r in ran)
    text = Text(f"IDENTICAL {same}/{len(ran)}" if same < len(ran) else "IDENTICAL",
                style="green" if same == len(ran) else "")
    groups: dict[tuple, set] = {}
    for r in ran:
        if r["status"] == "different":
            groups.setdefault((SHORT_FP8[r["fp8"]], r["scale_fmt"]), set()).update(r["causes"] or ["?"])
        elif r["status"] == "error":
            groups.setdefault((SHORT_FP8[r["fp8"]], r["scale_fmt"]), set()).add("error")
    for (fp8, scale), causes in groups.items():
        expected = all(r.get("expect") == "different" for r in ran if r["status"] == "different")
        text.append(f"\n{fp8}/{scale}: {', '.join(sorted(causes))}", style="yellow" if expected else "red")
    return text


def _reader_cell(runs: list[dict]) -> Text:
    ran = [r for r in runs if r["status"] != "skipped"]
    if not ran:
        return Text("skipped", style="dim")
    faults = [r for r in ran if r["status"] == "fault"]
    errors = [r for r in ran if r["status"] == "error"]
    if not faults and not errors:
        return Text(f"agrees ({len(ran)})", style="green")
    text = Text(f"agrees {len(ran) - len(faults) - len(errors)}/{len(ran)}")
    if faults:
        style = "yellow" if all(r.get("expect") == "different" for r in faults) else "red"
        where = sorted({f"n{r['next_n']}" for r in faults}) + sorted({SHORT_FP8[r["fp8"]] for r in faults})
        text.append(f"\nFAULT {' '.join(where)}\nrecall >= {min(r['recall'] for r in faults):.3f}", style=style)
    if errors:
        text.append(f"\nerror: {errors[0]['reason'][:60]}", style="red")
    return text


def render(result) -> Group:
    records = result.records
    columns = _columns(records)
    table = Table(title=f"fp8check ecosystem: {len(records)} runs in {result.seconds:.0f} s", show_lines=True)
    table.add_column("preset", no_wrap=True)
    table.add_column("role", no_wrap=True)
    for block, layout in columns:
        table.add_column(f"block {block}\n{layout}")
    skipped: dict[str, str] = {}
    keys = list(dict.fromkeys((r["preset"], r["role"]) for r in records))
    for preset, role in keys:
        mine = [r for r in records if r["preset"] == preset and r["role"] == role]
        cells = []
        for block, layout in columns:
            runs = [r for r in mine if r["block_size"] == block and r["layout"] == layout]
            cells.append(_writer_cell(runs) if role == "writer" else _reader_cell(runs))
        for r in mine:
            if r["status"] == "skipped":
                skipped.setdefault(r["reason"], preset)
        table.add_row(f"{mine[0]['project']}/{mine[0]['name']}\n{mine[0]['version']}", role, *cells)
    notes = [Text("skipped, with the reason:", style="bold")] if skipped else []
    notes += [Text(f"  {preset}: {reason}", style="dim") for reason, preset in skipped.items()]
    return Group(table, *notes, Text(verdict(result)))


def verdict(result) -> str:
    counts = {s: sum(r["status"] == s for r in result.records) for s in
              ("identical", "different", "pass", "fault", "skipped", "error")}
    expected = sum(r.get("expect") == "different" for r in result.records)
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    unexpected = len(result.unexpected)
    head = "PASS" if not unexpected and not result.errors else "FAIL"
    return f"{head}: {summary}; {expected} known upstream bug(s) as expected, {unexpected} unexpected"


def to_json(result) -> dict:
    return {"tool": "fp8check", "command": "ecosystem", "seconds": round(result.seconds, 3),
            "verdict": verdict(result), "runs": [dict(r) for r in result.records]}
