"""Collect: both caches' differing blocks as units. A unit is one token's quant group (qbs value bytes, one
fp32 scale): u = (i * block_size + t) * groups + g for the i-th differing block, token t, group g. Offsets come
from CacheSpec, poison from cache.poison_at."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.cache import CacheBuffer, guard_bytes, poison_at
from ..core.diff import DiffResult, count_true
from ..core.fp8 import decode_scales
from ..core.inputs import Inputs
from ..core.spec import CacheSpec, Layout

# Blocks compared per step when counting differing bytes per unit: the step's bool mask (17 MB at 8448-byte
# blocks) stays in the CPU cache; measured on 2 cores, 16384 blocks: ~31 ms, against ~57 ms for one whole-
# cache mask and then the count.
COUNT_BLOCKS = 2048
# Differing blocks whose every byte's cause is kept (Frame.shown): the byte maps of a report. Four blocks of
# DeepSeek's shape are 4 x 64 tokens x 132 bytes.
SHOWN_BLOCKS = 4


def any_rows(mask: torch.Tensor) -> torch.Tensor:
    """bool [N]: rows of a bool [N, M] mask with a True, reading 8 bools at a time where M allows."""
    if mask.shape[1] % 8 == 0 and mask.is_contiguous():
        return (mask.view(torch.int64) != 0).any(dim=1)
    return mask.any(dim=1)


def other_layout(spec: CacheSpec) -> Layout | None:
    """The order a candidate may have used instead of the spec's, where that order is defined."""
    if spec.layout is Layout.SHUFFLE:
        return Layout.LINEAR
    if spec.layout is Layout.INTERLEAVED:  # its values are no permutation of a planar value region's
        return None
    return Layout.SHUFFLE if spec.block_size % 16 == 0 else None


def unit_runs(spec: CacheSpec, value_index: torch.Tensor) -> tuple[int, torch.Tensor]:
    """(run length L, int64 [block_size * groups, qbs // L]): every unit's value bytes as runs of L bytes that
    are consecutive both in the block and in (token, dim) order, each run by its number in the value region
    (L: qbs in the linear layout, 16 in shuffle, 1 where nothing longer fits)."""
    qbs = spec.quant_block_size
    rows = value_index.view(-1, qbs)
    for length in (qbs, 16, 8, 4):
        if qbs % length or spec.value_extent % length:
            continue
        runs = rows.view(rows.shape[0], -1, length)
        step = torch.arange(length, device=rows.device)
        if bool(((runs[..., 0] % length) == 0).all()) and bool((runs - runs[..., :1] == step).all()):
            return length, runs[..., 0] // length
    return 1, rows


def _value_counts(spec: CacheSpec, mask: torch.Tensor, runs: tuple[int, torch.Tensor]) -> torch.Tensor:
    """int64 [n * block_size * groups]: True count per unit of a bool [n, value_bytes] mask in the spec's
    layout, counted where the bytes lie: a (token, dim) copy of the mask would cost more than the count."""
    n, qbs = mask.shape[0], spec.quant_block_size
    length, run_index = runs
    if length == qbs and torch.equal(run_index.view(-1), torch.arange(run_index.numel(), device=mask.device)):
        return count_true(mask.reshape(-1, qbs))  # linear: unit u is row u of the mask
    if spec.layout is Layout.SHUFFLE and length == 16 and qbs // 8 <= 255 and mask.is_contiguous():
        # shuffle (16 x 16 tiles, docs/NUMERICS.md): in each of its dim tiles a unit is one 16-byte row (two
        # int64 words) of its token tile. The tile view sums 8 bools per int64 lane without a gathered copy
        # (~2x faster than gathering the runs); unit_runs found exactly these runs in spec.value_index.
        tiles = mask.view(n, spec.block_size // 16, spec.groups_per_token, qbs // 16, 16, 16)
        lanes = tiles.view(torch.int64).sum(dim=(3, 5))  # [n, token tile, group, token % 16], lanes <= 255
        lanes = lanes.permute(0, 1, 3, 2).reshape(-1)  # in unit order
        # add up each word's lanes (their total, a unit's count, is <= qbs < 2**15: int16 is exact and cheap)
        return lanes.view(torch.uint8).view(-1, 8).sum(dim=1, dtype=torch.int16).long()
    return count_true(mask.reshape(n, -1, length)[:, run_index.view(-1)].reshape(-1, qbs))


def _unit_counts(spec: CacheSpec, a: torch.Tensor, b: torch.Tensor, runs) -> tuple[torch.Tensor, torch.Tensor]:
    """(differing value bytes, differing scale bytes), int64 [n * block_size * groups] each, per unit of two
    [n, block_bytes] caches."""
    values, scales = [], []
    vb, first = spec.value_extent, spec.scale_offset(0, 0)
    for start in range(0, a.shape[0], COUNT_BLOCKS):
        x, y = a[start : start + COUNT_BLOCKS], b[start : start + COUNT_BLOCKS]
        values.append(_value_counts(spec, x[:, :vb] != y[:, :vb], runs))
        if spec.layout.planar:
            scales.append((x[:, first : first + spec.scale_bytes] != y[:, first : first + spec.scale_bytes])
                          .view(-1, 4).sum(dim=1))
        else:
            scales.append(spec.scale_words(x != y).sum(dim=1))
    if not values:
        empty = torch.zeros(0, dtype=torch.int64, device=a.device)
        return empty, empty
    return torch.cat(values), torch.cat(scales)


def differing_units(spec: CacheSpec, baseline: CacheBuffer, candidate: CacheBuffer, diff: DiffResult | None,
                    runs) -> tuple[torch.Tensor, ...]:
    """(blocks, base_phys, cand_phys, n_u, wdiff_u): the blocks to look at (the diff's, when given), both
    caches' bytes of them and, per unit of them, the differing value and scale bytes. Once most blocks differ,
    all blocks are kept: copying the differing ones out (~75 ms for 2 x 138 MB on 2 cores) costs more than
    carrying identical blocks along, whose units have no byte to attribute."""
    a, b = baseline.flat, candidate.flat
    counts = None if diff is not None else _unit_counts(spec, a, b, runs)
    per_block = (diff.block_diff() if counts is None
                 else (counts[0] + counts[1]).view(spec.num_blocks, -1).sum(dim=1))
    blocks = torch.nonzero(per_block).view(-1).to(a.device)
    if 2 * blocks.numel() > spec.num_blocks:
        return torch.arange(spec.num_blocks, device=a.device), a, b, *(counts or _unit_counts(spec, a, b, runs))
    a, b = a.index_select(0, blocks), b.index_select(0, blocks)
    if counts is None:
        return blocks, a, b, *_unit_counts(spec, a, b, runs)
    return blocks, a, b, *(c.view(spec.num_blocks, -1)[blocks].reshape(-1) for c in counts)


def byte_poison(position: torch.Tensor) -> torch.Tensor:
    """uint8: the part of the poison fill that depends on the byte's position inside its block: poison_at is
    linear (cache.py), so poison(block start + byte) = poison_at(block start) + byte_poison(byte) in uint8."""
    return poison_at(position) - poison_at(torch.zeros_like(position))


@dataclass(frozen=True)
class Frame:
    """Differing blocks of both caches, as units. Value bytes stay where the caches keep them; the few
    units whose bytes are looked at are gathered (value_rows)."""

    spec: CacheSpec
    k: torch.Tensor  # bf16 [T, head_dim]
    blocks: torch.Tensor  # int64 [nd]: cache block of each differing block
    base_phys: torch.Tensor  # uint8 [nd, block_bytes]
    cand_phys: torch.Tensor
    n_u: torch.Tensor  # int64 [U] differing value bytes
    base_w: torch.Tensor  # float32 [U] scales
    cand_w: torch.Tensor
    base_wb: torch.Tensor  # uint8 [U, 4] scale bytes
    cand_wb: torch.Tensor
    wdiff_u: torch.Tensor  # int64 [U] differing scale bytes
    block_i: torch.Tensor  # int64 [U] index into `blocks`
    token: torch.Tensor  # int64 [U] token in its block
    group: torch.Tensor  # int64 [U]
    source: torch.Tensor  # int64 [U] row of k written there, -1 where no token maps
    block_mapped: torch.Tensor  # bool [nd] some token maps into the block
    value_index: torch.Tensor  # int64 [block_size, head_dim] (spec.value_index)
    run_length: int  # unit_runs
    runs: torch.Tensor
    poison_row: torch.Tensor  # uint8 [block_size * groups, qbs]: byte_poison of each unit row's value bytes
    poison_block: torch.Tensor  # uint8 [nd]: poison_at of each block's first byte
    padding: torch.Tensor  # int64 [P]: rows of k whose slot is negative (padding: written nowhere)
    shown: torch.Tensor  # bool [nd]: blocks whose bytes' causes are kept (the first SHOWN_BLOCKS differing, or picked)
    moves: tuple = (None, {})  # moved.byte_moves: the source of each value byte of a block, and the findings

    @property
    def mapped(self) -> torch.Tensor:
        return self.source >= 0

    @property
    def rows(self) -> int:  # units per block
        return self.poison_row.shape[0]

    def units_mask(self, units: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(self.n_u, dtype=torch.bool).index_fill_(0, units, True)

    def value_rows(self, phys: torch.Tensor, units: torch.Tensor) -> torch.Tensor:
        """uint8 [n, qbs]: the value bytes of units (int64 [n]) of base_phys or cand_phys, in (token, dim) order."""
        region = phys[:, : self.spec.value_extent].view(phys.shape[0], -1, self.run_length)
        picked = region[self.block_i[units].view(-1, 1), self.runs[units % self.runs.shape[0]]]
        return picked.reshape(units.numel(), self.spec.quant_block_size)

    def value_flat(self, unit: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
        """Flat cache index of value bytes (unit, column), any broadcastable shapes."""
        spec = self.spec
        dim = self.group[unit] * spec.quant_block_size + column
        return self.blocks[self.block_i[unit]] * spec.block_bytes + self.value_index[self.token[unit], dim]

    def scale_flat(self, unit: torch.Tensor) -> torch.Tensor:
        """Flat cache index of the first byte of each unit's scale."""
        offset = self.spec.scale_offset(self.token[unit], self.group[unit])
        return self.blocks[self.block_i[unit]] * self.spec.block_bytes + offset

    def value_poison(self, unit: torch.Tensor, column: torch.Tensor | None = None) -> torch.Tensor:
        """uint8: the poison fill under value bytes (unit, column), any broadcastable shapes; without a column,
        [n, qbs]: under every value byte of units [n]."""
        if column is None:
            unit, column = unit.view(-1, 1), torch.arange(self.spec.quant_block_size, device=unit.device)
        return self.poison_row[unit % self.rows, column] + self.poison_block[self.block_i[unit]]

    def block_poison(self, block_i: torch.Tensor, byte_in_block: torch.Tensor) -> torch.Tensor:
        """uint8: the poison fill at bytes of the differing blocks block_i."""
        return byte_poison(byte_in_block) + self.poison_block[block_i]

    def scale_poison(self, units: torch.Tensor) -> torch.Tensor:
        """uint8 [n, 4]: the poison fill under each unit's scale bytes."""
        offset = self.spec.scale_offset(self.token[units], self.group[units]).view(-1, 1)
        return self.block_poison(self.block_i[units].view(-1, 1), offset + torch.arange(4, device=units.device))

    def x(self, unit: torch.Tensor, column: torch.Tensor | None = None) -> torch.Tensor:
        """fp32 k values behind value bytes (unit, column) of mapped units; without a column, [n, qbs]: every
        value of units [n]."""
        if column is None:
            unit, column = unit.view(-1, 1), torch.arange(self.spec.quant_block_size, device=unit.device)
        return self.k[self.source[unit].clamp(min=0), self.group[unit] * self.spec.quant_block_size + column].float()

    def quotient_scale(self, unit: torch.Tensor) -> torch.Tensor:
        """The s of a unit's x/s: the candidate's scale where it is a positive finite number."""
        cand, base = self.cand_w[unit], self.base_w[unit]
        return torch.where(torch.isfinite(cand) & (cand > 0), cand, base)


def build_frame(spec: CacheSpec, inputs: Inputs, blocks: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                n_u: torch.Tensor, wdiff_u: torch.Tensor, runs, shown: tuple[int, ...] = ()) -> Frame:
    """The frame of the differing blocks' bytes a, b [nd, block_bytes] (differing_units); `shown` as diagnose's."""
    nd, groups = blocks.numel(), spec.groups_per_token
    num_units = nd * spec.block_size * groups
    base_wb, cand_wb = (spec.scale_words(x).reshape(num_units, 4) for x in (a, b))  # in (token, group) order
    unit = torch.arange(num_units, device=a.device)
    block_i = unit // (spec.block_size * groups)
    token = (unit // groups) % spec.block_size
    slot_token = torch.full((spec.num_slots,), -1, dtype=torch.int64, device=a.device)  # the row of k written there
    slots = inputs.slot_mapping.to(a.device)
    keep = (slots >= 0) & (slots < spec.num_slots)
    slot_token[slots[keep]] = torch.arange(slots.numel(), device=a.device)[keep]
    source = slot_token[blocks[block_i] * spec.block_size + token]
    value_index = spec.value_index(a.device)
    if shown:
        shown = torch.isin(blocks, torch.tensor(shown, dtype=blocks.dtype, device=blocks.device))
    else:
        differs = (n_u + wdiff_u).view(nd, -1).sum(dim=1) > 0
        shown = differs & (torch.cumsum(differs, dim=0) <= SHOWN_BLOCKS)
    return Frame(spec=spec, k=inputs.k.to(a.device).contiguous(), blocks=blocks, base_phys=a, cand_phys=b, n_u=n_u,
                 base_w=decode_scales(base_wb, spec.scale_fmt).view(-1), base_wb=base_wb, cand_wb=cand_wb,
                 cand_w=decode_scales(cand_wb, spec.scale_fmt).view(-1), wdiff_u=wdiff_u, block_i=block_i, token=token,
                 group=unit % groups, source=source, block_mapped=(source >= 0).view(nd, -1).any(dim=1),
                 value_index=value_index, run_length=runs[0], runs=runs[1], shown=shown,
                 poison_row=byte_poison(value_index).reshape(spec.block_size * groups, -1),
                 poison_block=poison_at(guard_bytes(spec) + blocks * spec.block_bytes),
                 padding=torch.nonzero(slots < 0).view(-1))
