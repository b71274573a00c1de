"""What a result shows as pictures and tables: plain data that a renderer draws (report/html.py), built by
the result itself (`Checked.views`), so that the renderer never asks what kind of result it holds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class CellMap:
    """A grid of cells, each of one category of `legend` or of none: a byte map (a block's tokens by the
    bytes of a token's row) or a heat map (blocks, each by its main category and the share that differs)."""

    name: str  # the anchor of the map in a page (unique within one result)
    title: str
    legend: tuple[str, ...]  # every category a map of this result may show; colours follow this order
    rows: int
    columns: int
    codes: bytes  # rows * columns, row-major: 0 no differing byte, k the category legend[k - 1]
    row_label: str
    column_label: str
    shade: tuple[float, ...] = ()  # heat maps: per cell, the share of its bytes that differ (0..1)
    column_marks: tuple[tuple[int, str], ...] = ()  # (column, name of the part that starts there)
    row_step: int = 0  # a line every row_step rows (16: the shuffle layout's token tiles)
    caption: str = ""
    cells: int = 0  # cells that stand for something (0: all); the rest of the last row is blank

    @property
    def used(self) -> int:
        return self.cells or self.rows * self.columns

    def counts(self) -> dict[str, int]:
        """Cells per category shown (what a reader of the picture should count)."""
        used = self.codes[: self.used]
        return {name: n for k, name in enumerate(self.legend) if (n := used.count(k + 1))}


@dataclass(frozen=True)
class Series:
    name: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    note: str = ""  # e.g. "expected to fail"


@dataclass(frozen=True)
class Curves:
    """Lines of y against x, one per series; x positions in `shaded` are drawn as a band (vacuous rows)."""

    name: str
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    shaded: tuple[float, ...] = ()
    shaded_label: str = ""
    log_x: bool = False


@dataclass(frozen=True)
class Cell:
    """One case of a grid: its tone (passed, failed, error, skipped, known: a declared difference that
    shows), a symbol, a tooltip (what ran, what it found) and the anchor of its section, if it has one."""

    tone: str
    symbol: str
    title: str
    href: str = ""


@dataclass(frozen=True)
class Grid:
    """Cases as a grid: one column per value of the parameter with most values, one row per setting of
    the other parameters that vary; `notes` (skip reasons) under it."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[tuple[Cell, ...], ...]], ...]  # (label, the cells of each column)
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, name: str, cases: list[tuple[dict[str, str], Cell]], notes: tuple[str, ...] = ()) -> "Grid | None":
        """The grid of cases given as (parameters, cell); None where no parameter varies."""
        axes = [a for a, _ in cases]
        values = {k: {a[k] for a in axes if k in a} for k in dict.fromkeys(k for a in axes for k in a)}
        # a parameter that only some kinds of case have, always alike, says no more than the kind
        varying = [k for k, seen in values.items() if len(seen) > 1]
        if not varying:
            return None
        column_key = max(varying, key=lambda k: len(values[k]))
        row_keys = [k for k in varying if k != column_key]
        columns = tuple(dict.fromkeys(a.get(column_key, MISSING) for a in axes))
        rows: dict[str, dict[str, list[Cell]]] = {}
        for a, cell in cases:
            label = " ".join(f"{k}={a[k]}" for k in row_keys if k in a)
            rows.setdefault(label, {}).setdefault(a.get(column_key, MISSING), []).append(cell)
        title = f"{len(cases)} cases: rows by {', '.join(row_keys) or 'case'}, columns by {column_key}"
        return cls(name, title, columns,
                   tuple((label, tuple(tuple(cells.get(c, ())) for c in columns)) for label, cells in rows.items()),
                   notes)


MISSING = "-"  # a grid column for cases without the column's parameter (a seed table among compares)
