"""Claims: what a stage says about some differing bytes (frozen). Stages return claims; the combiner adds
them up, and checks where a claim of cache bytes says they are."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .frame import Frame, any_rows
from .model import EXAMPLES, Category


@dataclass(frozen=True)
class Claim:
    category: Category
    bytes: int = 0
    examples: tuple[tuple[str, int], ...] = ()  # ("cache", flat index) or ("guard", guard offset)
    counts: dict = field(default_factory=dict)  # str -> int, summed over a category's claims
    found: dict = field(default_factory=dict)  # str -> value, merged over a category's claims
    per_block: torch.Tensor | None = None  # int64 [nd]: the bytes in each of the frame's blocks (None: guards)
    shown: torch.Tensor | None = None  # int64: flat cache index of each of the bytes in the frame's shown blocks


def note(category: Category, found: dict | None = None, **counts) -> Claim:
    """A claim of no bytes that only reports counts (and findings)."""
    return Claim(category, counts={key: int(value) for key, value in counts.items()}, found=found or {})


def unit_claim(frame: Frame, category: Category, units: torch.Tensor, *, value: bool = True,
               scale: bool = False) -> Claim:
    """All differing value (and/or scale) bytes of the units in the bool mask `units`."""
    examples, shown = [], []
    per_unit = torch.zeros_like(frame.n_u)
    in_shown = frame.shown[frame.block_i]
    parts = [(frame.n_u, lambda u: frame.value_rows(frame.base_phys, u) != frame.value_rows(frame.cand_phys, u),
              frame.value_flat)] * value
    parts += [(frame.wdiff_u, lambda u: frame.base_wb[u] != frame.cand_wb[u],
               lambda u, j: frame.scale_flat(u) + j)] * scale
    for n, differs, flat in parts:
        has = units & (n > 0)
        per_unit += torch.where(has, n, 0)  # no list of the (up to all) units' indices
        first = torch.nonzero(has).view(-1)[:EXAMPLES]
        column = torch.argmax(differs(first).to(torch.uint8), dim=1)  # each one's first differing byte
        examples += [("cache", int(i)) for i in flat(first, column).tolist()]
        picked = torch.nonzero(has & in_shown).view(-1)
        rows, columns = torch.nonzero(differs(picked), as_tuple=True)
        shown.append(flat(picked[rows], columns))
    per_block = per_unit.view(frame.blocks.numel(), -1).sum(dim=1)
    return Claim(category, int(per_unit.sum()), tuple(examples), per_block=per_block, shown=torch.cat(shown))


@dataclass(frozen=True)
class Bytes:
    """Differing value bytes to explain: a list (unit [N], column [N], bytes [N]) of the few bytes of sparse
    units, or a dense chunk (unit [n, 1], column [1, qbs], bytes [n, qbs]) of units. `differs` marks the
    differing bytes; stages pass along which of them are still unexplained (`left`, shaped like base)."""

    unit: torch.Tensor
    column: torch.Tensor
    base: torch.Tensor
    cand: torch.Tensor
    differs: torch.Tensor

    @property
    def dense(self) -> bool:
        return self.base.dim() == 2

    @classmethod
    def listed(cls, frame: Frame, units: torch.Tensor) -> "Bytes":
        index = torch.nonzero(units).view(-1)
        base_rows, cand_rows = frame.value_rows(frame.base_phys, index), frame.value_rows(frame.cand_phys, index)
        rows, column = torch.nonzero(base_rows != cand_rows, as_tuple=True)
        base, cand = base_rows[rows, column], cand_rows[rows, column]
        return cls(index[rows], column, base, cand, torch.ones_like(base, dtype=torch.bool))

    @classmethod
    def chunk(cls, frame: Frame, units: torch.Tensor) -> "Bytes":
        columns = torch.arange(frame.spec.quant_block_size, device=units.device).view(1, -1)
        base, cand = frame.value_rows(frame.base_phys, units), frame.value_rows(frame.cand_phys, units)
        return cls(units.view(-1, 1), columns, base, cand, base != cand)

    def entries(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(unit, column, flat position in this object) of every True byte of mask."""
        if not self.dense:
            index = torch.nonzero(mask).view(-1)
            return self.unit[index], self.column[index], index
        rows, columns = torch.nonzero(mask, as_tuple=True)
        return self.unit.view(-1)[rows], self.column.view(-1)[columns], rows * mask.shape[1] + columns

    def claim(self, frame: Frame, category: Category, mask: torch.Tensor, left: torch.Tensor,
              **counts) -> tuple[list[Claim], torch.Tensor]:
        """([the claim of the bytes of mask still left], what is left after it). counts: reported with it."""
        mask = mask & left
        count = int(torch.count_nonzero(mask))
        claims = [note(category, **counts)] if counts else []
        if not count:
            return claims, left
        nd = frame.blocks.numel()
        if self.dense:
            unit = self.unit.view(-1)
            rows = torch.nonzero(any_rows(mask)).view(-1)[:EXAMPLES]  # one example per unit: its first byte
            first = frame.value_flat(unit[rows], torch.argmax(mask[rows].to(torch.uint8), dim=1))
            per_block = torch.zeros(nd, dtype=torch.int64, device=mask.device).index_add_(
                0, frame.block_i[unit], mask.sum(dim=1))
            picked = frame.shown[frame.block_i[unit]]
            rows, columns = torch.nonzero(mask[picked], as_tuple=True)
            shown = frame.value_flat(unit[picked][rows], self.column.view(-1)[columns])
        else:
            index = torch.nonzero(mask).view(-1)[:EXAMPLES]
            first = frame.value_flat(self.unit[index], self.column[index])
            per_block = torch.bincount(frame.block_i[self.unit[mask]], minlength=nd)
            picked = mask & frame.shown[frame.block_i[self.unit]]
            shown = frame.value_flat(self.unit[picked], self.column[picked])
        examples = tuple(("cache", int(i)) for i in first.tolist())
        claims.append(Claim(category, count, examples, per_block=per_block, shown=shown))
        return claims, left & ~mask
