"""The diagnosis as pictures and tables (views.py): byte maps of the first differing blocks, each differing
byte coloured by its cause (Diagnosis.located), a heat map of every block, the cause and example tables."""

from __future__ import annotations

import math

import torch

from ..core.spec import CacheSpec, Layout
from ..core.views import CellMap, Table
from .model import Category, Diagnosis, Located
from .words import block_ranges, example_note, explain, percent

LEGEND = tuple(c.value for c in Category)  # colours follow this order in every map of every report
HEAT_COLUMNS = 128  # blocks per row of a heat map: 16384 blocks (1M tokens of block 64) are 128 x 128


def byte_maps(spec: CacheSpec, located: Located) -> tuple[CellMap, ...]:
    """One map per block of `located.shown_blocks`, every cell one byte of the block: a row per token, its
    values by dim, then the bytes of its scale words by group."""
    order = torch.cat([spec.value_index(), spec.scale_index().view(spec.block_size, -1)], dim=1)
    flat, codes = located.shown_bytes.cpu(), located.shown_codes.cpu()
    block_of = flat // spec.block_bytes
    maps = []
    for block in located.shown_blocks:
        cells = torch.zeros(spec.block_bytes, dtype=torch.uint8)
        mine = block_of == block
        cells[flat[mine] % spec.block_bytes] = codes[mine] + 1
        maps.append(CellMap(
            name=f"block-{block}", title=f"block {block}: {spec.block_size} tokens x {spec.row_bytes} bytes",
            legend=LEGEND, rows=spec.block_size, columns=spec.row_bytes, codes=cells[order].numpy().tobytes(),
            row_label="token in block", column_label="byte of the token's row: values by dim, then scale bytes",
            column_marks=((0, "values"), (spec.head_dim, "scales")),
            row_step=16 if spec.layout is Layout.SHUFFLE else 0,
            caption=f"{int(mine.sum())} of {spec.block_bytes} bytes differ; each coloured by its cause"))
    return tuple(maps)


def heat_map(spec: CacheSpec, located: Located) -> CellMap:
    """Every block one cell: the category with most of its bytes, shaded by the share of its bytes that differ."""
    per_block = located.per_block.cpu()
    total = per_block.sum(dim=1)
    main = torch.where(total > 0, per_block.argmax(dim=1) + 1, 0).to(torch.uint8)
    columns = min(spec.num_blocks, HEAT_COLUMNS)
    rows = math.ceil(spec.num_blocks / columns)
    pad = rows * columns - spec.num_blocks  # empty cells of the last row
    codes = torch.cat([main, torch.zeros(pad, dtype=torch.uint8)])
    shade = torch.cat([total.double() / (spec.value_bytes + spec.scale_bytes), torch.zeros(pad, dtype=torch.float64)])
    differing = int((total > 0).sum())
    return CellMap(
        name="blocks", title=f"all {spec.num_blocks} blocks, {columns} per row", legend=LEGEND, rows=rows,
        columns=columns, codes=codes.numpy().tobytes(), row_label=f"blocks / {columns}",
        column_label=f"block % {columns}", shade=tuple(shade.tolist()), cells=spec.num_blocks,
        caption=f"{differing} of {spec.num_blocks} blocks differ; each coloured by the cause of most of its bytes,"
                " darker where more of its bytes differ")


def cause_table(spec: CacheSpec, diagnosis: Diagnosis, total: int) -> Table:
    rows = tuple((c.category.value, str(c.bytes), percent(c.bytes, total), block_ranges(c.blocks),
                  " Fix: ".join(filter(None, explain(c, spec)))) for c in diagnosis)  # the hint if any
    return Table("causes", ("cause", "bytes", "share", "blocks", "what fits"), rows)


def example_table(diagnosis: Diagnosis) -> Table:
    """Each cause's first bytes: where, both bytes and both decoded values, what fits there."""
    def value(v: float | None) -> str:
        return "" if v is None else f"{v:.9g}"

    rows = tuple((cause.category.value, e.where(), f"0x{e.baseline_byte:02x}", value(e.baseline_value),
                  f"0x{e.candidate_byte:02x}", value(e.candidate_value), example_note(cause.category, e) or "")
                 for cause in diagnosis for e in cause.examples)
    return Table("differing bytes, examples of each cause",
                 ("cause", "where", "baseline", "decoded", "candidate", "decoded", "what fits"), rows)


def diagnosis_views(spec: CacheSpec, diagnosis: Diagnosis) -> tuple:
    """The maps (a heat map when some blocks have no byte map), the cause table and the examples."""
    views: list = []
    if (located := diagnosis.located) is not None:
        if spec.num_blocks > len(located.shown_blocks):
            views.append(heat_map(spec, located))
        views += byte_maps(spec, located)
    if len(diagnosis):
        total = spec.num_blocks * (spec.value_bytes + spec.scale_bytes)
        views += [cause_table(spec, diagnosis, total), example_table(diagnosis)]
    return tuple(views)
