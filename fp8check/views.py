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


View = Table | CellMap | Curves
