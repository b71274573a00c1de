"""Why two caches differ: every differing byte attributed to exactly one root cause.

Pure: `diagnose(spec, baseline, candidate, inputs) -> Diagnosis`, tensors in, frozen records out, on
whatever device the caches live on. The inputs (k, slot_mapping) say which slots were written and let
the quotient x/s be recomputed where a cause needs it.

Precedence (the first cause that fits takes the bytes; SPEC.md sections 2-5 for the facts):
1. where: guard bytes and bytes of slots no token maps to are `stray-write` (value bytes of an unmapped
   slot are first offered to `layout`, which moves bytes between the slots of a block);
2. scale words of mapped slots: `unwritten` (still poison), `scale-ulp`, `scale-ratio`, `scale-pow2`.
   The value bytes of a quant group whose scale has one of the scale causes inherit it: a wrong scale
   moves every value of its group;
3. systemic value causes, judged per quant group (a unit: one token's qbs value bytes) from a sample of
   its columns, and then given all its differing bytes: `layout` (judged per block), `unwritten`,
   `fp8-format`, `integer-cast`. Units with few differing bytes are judged byte by byte instead, and a
   cause needs 4 matching bytes and half the unit's (or just one byte once it was found in a dense unit),
   so chance coincidences (1 in 256) never add up to a cause;
4. byte-local causes: `signed-zero`, `saturation-nan`, `rounding`; a byte still holding poison is
   `unwritten`;
5. `unknown`, with examples.
"""

from __future__ import annotations

import enum
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import torch

from . import fp8
from .cache import POISON_OFFSET, POISON_STEP, CacheBuffer, guard_bytes, poison_at
from .diff import DiffResult, Mismatch, count_true, mismatch_at
from .inputs import Inputs
from .spec import SCALE_FLOOR, CacheSpec, Coordinate, FP8Format, Layout, Region, ScaleFormat


class Category(enum.Enum):
    UNWRITTEN = "unwritten"
    STRAY_WRITE = "stray-write"
    INTEGER_CAST = "integer-cast"
    LAYOUT = "layout"
    FP8_FORMAT = "fp8-format"
    SCALE_RATIO = "scale-ratio"
    SCALE_POW2 = "scale-pow2"
    SCALE_ULP = "scale-ulp"
    ROUNDING = "rounding"
    SATURATION_NAN = "saturation-nan"
    SIGNED_ZERO = "signed-zero"
    UNKNOWN = "unknown"


# DIVs seen in real writers (SPEC.md section 3) and what each one is.
KNOWN_DIVISORS = {448.0: "e4m3fn's max", 240.0: "e4m3fnuz's max", 224.0: "vLLM's e4m3fnuz divisor",
                  57344.0: "e5m2's max"}
SAMPLE_COLUMNS = 8  # columns of each unit looked at to judge a systemic cause
DENSE_SAMPLED = 6  # sampled differing bytes that make a unit judged by its sample
SAMPLE_SHARE = 0.75  # share of the sampled differing bytes a systemic cause must explain
MIN_MATCHES = 4  # matching bytes a systemic cause needs in a unit judged byte by byte
ULP_LIMIT = 16  # fp32 scales this many units in the last place apart or less: scale-ulp
BOUNDARY_TOLERANCE = 2.0**-20  # |amax / (DIV * s) - 1| below this: amax / DIV sits on s
RATIO_RESOLUTION = 2.0**-12  # log2 ratios this close are one ratio
EXAMPLES = 3
PROBE_UNITS = 1024  # dense units tried with every cause first, to try the likely cause first on all
CHUNK_BYTES = 1 << 22  # dense byte-local work per step
FIRST_COLUMNS = 3  # sampled columns a dense judge tries first: 3 non-fitting differing bytes rule a unit out
JUDGE_ROWS = 1 << 16  # dense units judged per step, so a step's temporaries stay in the CPU cache


# ---- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """One differing byte of a cause: where, both bytes, both decoded values, and what fits."""

    coordinate: Coordinate | None  # None: a guard byte outside the cache
    guard_offset: int | None  # guard bytes: -1 is the byte right before the cache, 0 the first one past its end
    baseline_byte: int
    candidate_byte: int
    baseline_value: float | None  # value region: FP8 values; scale region: the fp32 scales
    candidate_value: float | None
    note: str | None = None

    def where(self) -> str:
        if self.coordinate is not None:
            return self.coordinate.describe()
        if self.guard_offset < 0:
            return f"guard byte {-self.guard_offset} before the cache"
        return f"guard byte {self.guard_offset} past the end of the cache"

    def describe(self) -> str:
        def show(byte: int, value: float | None) -> str:
            return f"0x{byte:02x}" if value is None else f"0x{byte:02x} ({value:g})"

        text = f"{self.where()}: baseline {show(self.baseline_byte, self.baseline_value)}, " \
               f"candidate {show(self.candidate_byte, self.candidate_value)}"
        return f"{text}; {self.note}" if self.note else text

    def to_dict(self) -> dict:
        c = self.coordinate
        return {
            "block": c.block if c else None, "token": c.token if c else None, "dim": c.dim if c else None,
            "scale_group": c.group if c else None, "region": c.region.value if c else "guard",
            "byte_in_block": c.byte_in_block if c else None, "guard_offset": self.guard_offset,
            "baseline_byte": f"0x{self.baseline_byte:02x}", "candidate_byte": f"0x{self.candidate_byte:02x}",
            "baseline_value": _json_float(self.baseline_value), "candidate_value": _json_float(self.candidate_value),
            "note": self.note,
        }


@dataclass(frozen=True)
class Cause:
    category: Category
    bytes: int
    blocks: tuple[int, ...]  # blocks holding at least one of the bytes (guard bytes have none)
    explanation: str  # one sentence
    hint: str | None
    examples: tuple[Example, ...]

    def to_dict(self) -> dict:
        return {
            "category": self.category.value, "bytes": self.bytes, "blocks": list(self.blocks),
            "explanation": self.explanation, "hint": self.hint, "examples": [e.to_dict() for e in self.examples],
        }


@dataclass(frozen=True)
class Diagnosis:
    """The causes of all differing bytes, most bytes first; empty when the caches are identical."""

    causes: tuple[Cause, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.causes)

    @property
    def top(self) -> Cause | None:
        return self.causes[0] if self.causes else None

    def __len__(self) -> int:
        return len(self.causes)

    def __iter__(self):
        return iter(self.causes)

    def by_category(self) -> dict[Category, Cause]:
        return {c.category: c for c in self.causes}

    def to_json(self) -> list[dict]:
        return [c.to_dict() for c in self.causes]


class DiagnosisError(AssertionError):
    """fp8check's own bookkeeping failed (bytes lost or counted twice): a bug, never a mismatch."""


def _json_float(value: float | None):
    if value is None or math.isfinite(value):
        return value
    return str(value)  # NaN and inf are not JSON


# ---- helpers over tensors ------------------------------------------------------------------------


def count_rows(mask: torch.Tensor) -> torch.Tensor:
    """int64 [N]: True count per row of a bool [N, M] mask (the diff's lane-summing count)."""
    return count_true(mask)


def any_rows(mask: torch.Tensor) -> torch.Tensor:
    """bool [N]: rows of a bool [N, M] mask with a True, reading 8 bools at a time where M allows."""
    if mask.shape[1] % 8 == 0 and mask.is_contiguous():
        return (mask.view(torch.int64) != 0).any(dim=1)
    return mask.any(dim=1)


def logical(spec: CacheSpec, value_region: torch.Tensor, layout: Layout) -> torch.Tensor:
    """uint8 [n, block_size, head_dim] (token, dim) view of n blocks' value regions [n, value_bytes] stored
    in `layout`: a permuted copy, the same bytes as indexing with spec.value_index() but ~8x faster."""
    n = value_region.shape[0]
    bs, hd = spec.block_size, spec.head_dim
    if layout is Layout.LINEAR:
        return value_region.reshape(n, bs, hd)
    tiles = value_region.reshape(n, bs // 16, hd // 16, 16, 16)  # (token tile, dim tile, t % 16, d % 16)
    return tiles.permute(0, 1, 3, 2, 4).reshape(n, bs, hd)


def other_layout(spec: CacheSpec) -> Layout | None:
    """The order a candidate may have used instead of the spec's, where that order is defined."""
    if spec.layout is Layout.SHUFFLE:
        return Layout.LINEAR
    return Layout.SHUFFLE if spec.block_size % 16 == 0 else None


def _fp8_max_codes(fmt: FP8Format) -> tuple[int, int]:
    top = 0x7E if fmt is FP8Format.E4M3FN else 0x7F
    return top, top | 0x80


def _zero_pair(base: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """bool: both bytes are zeros of either sign (0x00 / 0x80): evidence of `signed-zero` only."""
    return ((base | cand) & 0x7F) == 0


def _other_format(fmt: FP8Format) -> FP8Format:
    return FP8Format.E4M3FNUZ if fmt is FP8Format.E4M3FN else FP8Format.E4M3FN


# ---- the frame: both caches' differing blocks in (unit, column) form ----------------------------------

# Blocks compared per step when counting differing bytes per unit: the step's bool mask (17 MB at 8448-byte
# blocks) stays in the CPU cache; measured on 2 cores, 16384 blocks: ~31 ms, against ~57 ms for one whole-
# cache mask and then the count.
COUNT_BLOCKS = 2048


def _fold_lanes(lanes: torch.Tensor) -> torch.Tensor:
    """int64: the sum of the 8 byte lanes of each int64 (each lane <= 255)."""
    lanes = (lanes & 0x00FF00FF00FF00FF) + ((lanes >> 8) & 0x00FF00FF00FF00FF)
    lanes = (lanes & 0x0000FFFF0000FFFF) + ((lanes >> 16) & 0x0000FFFF0000FFFF)
    return (lanes & 0xFFFFFFFF) + (lanes >> 32)


def _value_counts(spec: CacheSpec, mask: torch.Tensor) -> torch.Tensor:
    """int64 [n * block_size * groups]: True count per unit of a bool [n, value_bytes] mask in the spec's
    layout, counted where the bytes lie: a (token, dim) copy of the mask would cost more than the count."""
    n, qbs = mask.shape[0], spec.quant_block_size
    num_units = n * spec.block_size * spec.groups_per_token
    if spec.layout is Layout.LINEAR:
        return count_true(mask.reshape(num_units, qbs))
    if qbs % 16 == 0 and qbs // 8 <= 255 and mask.is_contiguous():
        # shuffle: a unit is, in each of its dim tiles, one 16-byte row (two int64 words) of its token tile
        tiles = mask.view(n, spec.block_size // 16, spec.groups_per_token, qbs // 16, 16, 16)
        lanes = tiles.view(torch.int64).sum(dim=(3, 5))  # [n, token tile, group, token % 16]
        return _fold_lanes(lanes).permute(0, 1, 3, 2).reshape(num_units)
    return count_true(logical(spec, mask, spec.layout).reshape(num_units, qbs))


def _unit_counts(spec: CacheSpec, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(differing value bytes, differing scale bytes), int64 [n * block_size * groups] each, per unit of two
    [n, block_bytes] caches."""
    values, scales = [], []
    vb = spec.value_bytes
    for start in range(0, a.shape[0], COUNT_BLOCKS):
        x, y = a[start : start + COUNT_BLOCKS], b[start : start + COUNT_BLOCKS]
        values.append(_value_counts(spec, x[:, :vb] != y[:, :vb]))
        scales.append((x[:, vb:] != y[:, vb:]).view(-1, 4).sum(dim=1))
    if not values:
        empty = torch.zeros(0, dtype=torch.int64, device=a.device)
        return empty, empty
    return torch.cat(values), torch.cat(scales)


def _differing_units(spec: CacheSpec, baseline: CacheBuffer, candidate: CacheBuffer,
                     diff: DiffResult | None) -> tuple[torch.Tensor, ...]:
    """(blocks, base_phys, cand_phys, n_u, wdiff_u): the blocks to look at, both caches' bytes of them and, per
    unit of them, the differing value and scale bytes. The diff's per-block counts, when given, spare
    reading the blocks that do not differ.

    Once most blocks differ, all blocks are kept: copying the differing ones out (~75 ms for 2 x 138 MB on 2
    cores) costs more than carrying identical blocks along, whose units have no byte to attribute."""
    a, b = baseline.flat, candidate.flat
    all_blocks = torch.arange(spec.num_blocks, device=a.device)
    if diff is not None:
        blocks = torch.nonzero(diff.block_diff()).view(-1).to(a.device)
        if 2 * blocks.numel() > spec.num_blocks:
            return (all_blocks, a, b, *_unit_counts(spec, a, b))
        a, b = a.index_select(0, blocks), b.index_select(0, blocks)
        return (blocks, a, b, *_unit_counts(spec, a, b))
    n_u, wdiff_u = _unit_counts(spec, a, b)
    per_block = (n_u + wdiff_u).view(spec.num_blocks, -1).sum(dim=1)
    blocks = torch.nonzero(per_block).view(-1)
    if 2 * blocks.numel() > spec.num_blocks:
        return all_blocks, a, b, n_u, wdiff_u
    rows = spec.block_size * spec.groups_per_token
    return (blocks, a.index_select(0, blocks), b.index_select(0, blocks), n_u.view(-1, rows)[blocks].reshape(-1),
            wdiff_u.view(-1, rows)[blocks].reshape(-1))


def _unit_runs(spec: CacheSpec, value_index: torch.Tensor) -> tuple[int, torch.Tensor]:
    """(run length L, int64 [block_size * groups, qbs // L]): every unit's value bytes as runs of L bytes that
    are consecutive both in the block and in (token, dim) order, each run by its number in the value region
    (L: qbs in the linear layout, 16 in shuffle, 1 where nothing longer fits)."""
    qbs = spec.quant_block_size
    rows = value_index.view(-1, qbs)
    for length in (qbs, 16, 8):
        if qbs % length:
            continue
        runs = rows.view(rows.shape[0], -1, length)
        step = torch.arange(length, device=rows.device)
        if bool(((runs[..., 0] % length) == 0).all()) and bool((runs - runs[..., :1] == step).all()):
            return length, runs[..., 0] // length
    return 1, rows


@dataclass(frozen=True)
class _Frame:
    """Differing blocks of both caches, as units (one token's quant group: qbs value bytes + one scale).

    Unit u = (i * block_size + t) * groups + g for the i-th differing block, token t, group g. Value bytes stay
    where the caches keep them; the few units whose bytes are looked at are gathered (value_rows, sample).
    """

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
    run_length: int  # _unit_runs
    runs: torch.Tensor
    # The poison fill (i * POISON_STEP + POISON_OFFSET) % 256 of buffer byte i splits into a part per
    # block and a part per byte of the block, added mod 256 in uint8: no int64 position arithmetic over
    # whole caches.
    poison_row: torch.Tensor  # uint8 [block_size * groups, qbs]: byte part, per (token, group) row
    poison_block: torch.Tensor  # uint8 [nd]: block part

    @property
    def mapped(self) -> torch.Tensor:
        return self.source >= 0

    def value_rows(self, phys: torch.Tensor, units: torch.Tensor) -> torch.Tensor:
        """uint8 [n, qbs]: the value bytes of units (int64 [n]) of base_phys or cand_phys, in (token, dim) order."""
        region = phys[:, : self.spec.value_bytes].view(phys.shape[0], -1, self.run_length)
        picked = region[self.block_i[units].view(-1, 1), self.runs[units % self.runs.shape[0]]]
        return picked.reshape(units.numel(), self.spec.quant_block_size)

    def sample(self, phys: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """uint8 [U, len(columns)]: the value bytes at these columns of every unit of base_phys or cand_phys."""
        index = self.value_index.view(-1, self.spec.quant_block_size)[:, columns].reshape(-1)
        return phys[:, index].view(-1, columns.numel())

    def value_flat(self, unit: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
        """Flat cache index of value bytes (unit, column), any broadcastable shapes."""
        spec = self.spec
        dim = self.group[unit] * spec.quant_block_size + column
        return self.blocks[self.block_i[unit]] * spec.block_bytes + self.value_index[self.token[unit], dim]

    def value_poison(self, unit: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
        rows = self.poison_row.shape[0]
        return self.poison_row[unit % rows, column] + self.poison_block[self.block_i[unit]]

    def poison_rows(self, units: torch.Tensor) -> torch.Tensor:
        """uint8 [n, qbs]: the poison fill under every value byte of the units."""
        rows = self.poison_row.shape[0]
        return self.poison_row.index_select(0, units % rows) + self.poison_block[self.block_i[units]].view(-1, 1)

    def scale_poison(self, units: torch.Tensor) -> torch.Tensor:
        """uint8 [n, 4]: the poison fill under each unit's scale bytes, split like poison_row."""
        spec, rows = self.spec, self.poison_row.shape[0]
        device = units.device
        offset = spec.value_bytes + 4 * torch.arange(rows, device=device).view(-1, 1) + torch.arange(4, device=device)
        byte_part = ((offset * POISON_STEP) % 256).to(torch.uint8)
        return byte_part.index_select(0, units % rows) + self.poison_block[self.block_i[units]].view(-1, 1)

    def scale_flat(self, unit: torch.Tensor) -> torch.Tensor:
        """Flat cache index of the first byte of each unit's scale."""
        spec = self.spec
        return (self.blocks[self.block_i[unit]] * spec.block_bytes + spec.value_bytes
                + 4 * (self.token[unit] * spec.groups_per_token + self.group[unit]))

    def x(self, unit: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
        """fp32 k values behind value bytes (unit, column) of mapped units."""
        hd = self.spec.head_dim
        dim = self.group[unit] * self.spec.quant_block_size + column
        return self.k.view(-1)[self.source[unit].clamp(min=0) * hd + dim].float()

    def quotient_scale(self, unit: torch.Tensor) -> torch.Tensor:
        """The s of a unit's x/s: the candidate's scale where it is a positive finite number."""
        cand, base = self.cand_w[unit], self.base_w[unit]
        return torch.where(torch.isfinite(cand) & (cand > 0), cand, base)


def _frame(spec: CacheSpec, inputs: Inputs, blocks: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
           n_u: torch.Tensor, wdiff_u: torch.Tensor) -> _Frame:
    """The frame of the differing blocks, from their bytes a, b [nd, block_bytes] (_differing_units)."""
    nd, qbs, groups = blocks.numel(), spec.quant_block_size, spec.groups_per_token
    num_units = nd * spec.block_size * groups
    scales = slice(spec.value_bytes, spec.value_bytes + spec.scale_bytes)
    base_wb = a[:, scales].reshape(num_units, 4)
    cand_wb = b[:, scales].reshape(num_units, 4)
    unit = torch.arange(num_units, device=a.device)
    block_i = unit // (spec.block_size * groups)
    token = (unit // groups) % spec.block_size
    slot_token = torch.full((spec.num_slots,), -1, dtype=torch.int64, device=a.device)
    slots = inputs.slot_mapping.to(a.device)
    keep = (slots >= 0) & (slots < spec.num_slots)
    slot_token[slots[keep]] = torch.arange(slots.numel(), device=a.device)[keep]
    source = slot_token[blocks[block_i] * spec.block_size + token]
    value_index = spec.value_index(a.device)
    run_length, runs = _unit_runs(spec, value_index)
    return _Frame(
        spec=spec, k=inputs.k.to(a.device).contiguous(), blocks=blocks, base_phys=a, cand_phys=b, n_u=n_u,
        base_w=base_wb.contiguous().view(torch.float32).view(-1), cand_w=cand_wb.contiguous().view(torch.float32).view(-1),
        base_wb=base_wb, cand_wb=cand_wb, wdiff_u=wdiff_u,
        block_i=block_i, token=token, group=unit % groups, source=source,
        block_mapped=(source >= 0).view(nd, -1).any(dim=1), value_index=value_index, run_length=run_length,
        runs=runs, poison_row=((value_index * POISON_STEP) % 256).to(torch.uint8).reshape(spec.block_size * groups, qbs),
        poison_block=(((guard_bytes(spec) + blocks * spec.block_bytes) * POISON_STEP + POISON_OFFSET) % 256).to(torch.uint8),
    )


# ---- the ledger: bytes, blocks, examples and facts of each category ---------------------------------------


@dataclass
class _Ledger:
    """Accumulates findings while the stages run; `_causes` freezes them. Private to diagnose()."""

    bytes: Counter = field(default_factory=Counter)
    blocks: dict = field(default_factory=lambda: defaultdict(list))
    examples: dict = field(default_factory=lambda: defaultdict(list))  # category -> [("cache"|"guard", index)]
    facts: dict = field(default_factory=lambda: defaultdict(Counter))

    def add(self, category: Category, count: int, blocks: torch.Tensor | None, examples: list[tuple[str, int]]):
        if count <= 0:
            return
        self.bytes[category] += count
        if blocks is not None and blocks.numel():
            self.blocks[category].append(torch.unique(blocks))
        room = EXAMPLES - len(self.examples[category])
        self.examples[category].extend(examples[:max(room, 0)])

    def note(self, category: Category, **counts) -> None:
        for key, value in counts.items():
            self.facts[category][key] += int(value)


def _first(mask: torch.Tensor, n: int = EXAMPLES) -> torch.Tensor:
    """Indices of the first n True entries of a 1-D mask."""
    if not mask.numel():
        return mask.new_zeros(0, dtype=torch.int64)
    return torch.nonzero(mask).view(-1)[:n]


def _units_mask(frame: _Frame, units: torch.Tensor) -> torch.Tensor:
    mask = torch.zeros_like(frame.n_u, dtype=torch.bool)
    mask[units] = True
    return mask


def _take_units(frame: _Frame, ledger: _Ledger, category: Category, units: torch.Tensor, *, value: bool = True,
                scale: bool = False) -> None:
    """Give `category` all differing value (and/or scale) bytes of the units in the bool mask `units`."""
    count = 0
    examples = []
    giving = torch.zeros_like(units)
    if value:
        has = units & (frame.n_u > 0)
        count += int(torch.where(has, frame.n_u, 0).sum())  # no list of the (up to all) units' indices
        giving |= has
        for u in _first(has).tolist():
            unit = torch.tensor([u], device=units.device)
            row = frame.value_rows(frame.base_phys, unit) != frame.value_rows(frame.cand_phys, unit)
            column = int(torch.argmax(row[0].to(torch.uint8)))
            examples.append(("cache", int(frame.value_flat(unit[0], torch.tensor(column)))))
    if scale:
        has = units & (frame.wdiff_u > 0)
        count += int(torch.where(has, frame.wdiff_u, 0).sum())
        giving |= has
        for u in _first(has).tolist():
            j = int(torch.argmax((frame.base_wb[u] != frame.cand_wb[u]).to(torch.uint8)))
            examples.append(("cache", int(frame.scale_flat(torch.tensor(u))) + j))
    # the blocks, one per block rather than one per unit: ledger.add sorts them
    ledger.add(category, count, frame.blocks[any_rows(giving.view(frame.blocks.numel(), -1))], examples)


# ---- stage 1: where ------------------------------------------------------------------------------------


def _guards(baseline: CacheBuffer, candidate: CacheBuffer, ledger: _Ledger, cache_bytes: int) -> None:
    a, b = baseline.guards, candidate.guards  # [front guard | back guard]
    differs = a != b
    count = int(differs.sum())
    if not count:
        return
    guard = baseline.guard_bytes
    offset = torch.arange(2 * guard, device=a.device) - guard  # Example.guard_offset
    position = torch.where(offset < 0, offset, offset + cache_bytes) + guard  # in the whole buffer
    ledger.add(Category.STRAY_WRITE, count, None, [("guard", int(o)) for o in offset[differs][:EXAMPLES].tolist()])
    ledger.note(Category.STRAY_WRITE, guard=count, candidate_guard=int((differs & (b != poison_at(position))).sum()))


def _unmapped(frame: _Frame, ledger: _Ledger, open_u: torch.Tensor) -> None:
    """Scale words of unmapped slots, and whole units of blocks no token maps into: stray writes."""
    unmapped = ~frame.mapped
    _take_units(frame, ledger, Category.STRAY_WRITE, unmapped, value=False, scale=True)
    empty_block = unmapped & ~frame.block_mapped[frame.block_i]
    _take_units(frame, ledger, Category.STRAY_WRITE, empty_block & open_u)
    open_u &= ~empty_block


# ---- stage 2: scales ------------------------------------------------------------------------------------


def _amax(frame: _Frame, units: torch.Tensor) -> torch.Tensor:
    qbs = frame.spec.quant_block_size
    columns = torch.arange(qbs, device=units.device)
    return frame.x(units.view(-1, 1), columns.view(1, -1)).abs().amax(dim=1)


def _on_boundary(frame: _Frame, units: torch.Tensor) -> torch.Tensor:
    """bool: amax / DIV of each unit sits on the smaller of its two scales for some known DIV."""
    if not units.numel():
        return torch.zeros(0, dtype=torch.bool, device=units.device)
    amax = _amax(frame, units).clamp(min=SCALE_FLOOR).double()
    low = torch.minimum(frame.base_w[units], frame.cand_w[units]).double()
    near = torch.zeros_like(amax, dtype=torch.bool)
    for divisor in KNOWN_DIVISORS:
        near |= ((amax / (divisor * low)) - 1).abs() <= BOUNDARY_TOLERANCE
    return near


def _scales(frame: _Frame, ledger: _Ledger, open_u: torch.Tensor) -> None:
    """Scale words of mapped units; value bytes of groups whose scale has a scale cause inherit it."""
    spec = frame.spec
    differs = frame.mapped & (frame.wdiff_u > 0)
    if not bool(differs.any()):
        return
    units = torch.nonzero(differs).view(-1)
    base_w, cand_w = frame.base_w[units], frame.cand_w[units]
    poison = frame.scale_poison(units)
    cand_unwritten = (frame.cand_wb[units] == poison).all(dim=1)
    base_unwritten = (frame.base_wb[units] == poison).all(dim=1) & ~cand_unwritten
    unwritten = cand_unwritten | base_unwritten
    finite = torch.isfinite(base_w) & torch.isfinite(cand_w) & (base_w > 0) & (cand_w > 0) & ~unwritten
    bits = frame.base_wb[units].contiguous().view(torch.int32).view(-1).long() - \
        frame.cand_wb[units].contiguous().view(torch.int32).view(-1).long()
    ulp = finite & (bits.abs() <= ULP_LIMIT)
    ratio_units = finite & ~ulp
    ratio = cand_w.double() / base_w.double()
    log_ratio = torch.log2(ratio)
    pow2 = torch.zeros_like(ratio_units)
    if spec.scale_fmt is ScaleFormat.UE8M0:
        doubled = ratio_units & ((ratio == 2.0) | (ratio == 0.5))
        pow2[doubled] = _on_boundary(frame, units[doubled])
    # the constant multiple: the most common ratio among the groups not explained by a flipped ceil, if it
    # is the ratio of most of them (random scale words share a ratio only by chance)
    in_cluster = torch.zeros_like(ratio_units)
    plain = ratio_units & ~pow2
    if bool(plain.any()):
        keys = torch.round(log_ratio[plain] / RATIO_RESOLUTION).long()
        # the smallest of the most common keys, counted in bins (no sort): |log2 ratio| of two positive
        # finite fp32 numbers is below 278, so there are at most ~2.3M bins
        low = keys.min()
        mode = float(low + torch.argmax(torch.bincount(keys - low))) * RATIO_RESOLUTION
        in_cluster = ratio_units & ((log_ratio - mode).abs() <= 2 * RATIO_RESOLUTION)
        if 2 * int(in_cluster.sum()) >= int(plain.sum()):
            ledger.facts[Category.SCALE_RATIO]["ratio"] = float(torch.median(ratio[in_cluster]))
        else:
            in_cluster = torch.zeros_like(ratio_units)
    pow2 &= ~in_cluster

    for category, chosen in ((Category.UNWRITTEN, unwritten), (Category.SCALE_ULP, ulp),
                             (Category.SCALE_RATIO, in_cluster), (Category.SCALE_POW2, pow2)):
        if not bool(chosen.any()):
            continue
        mask = _units_mask(frame, units[chosen])
        _take_units(frame, ledger, category, mask, value=False, scale=True)
        if category is not Category.UNWRITTEN:  # a wrong scale moves every value of its group
            _take_units(frame, ledger, category, mask & open_u)
            open_u &= ~mask
    ledger.note(Category.UNWRITTEN, baseline_scale_words=int(base_unwritten.sum()))
    if bool(ulp.any()):
        ledger.facts[Category.SCALE_ULP]["max_ulp"] = int(bits[ulp].abs().max())
    ledger.note(Category.SCALE_POW2, doubled=int((pow2 & (ratio > 1)).sum()), halved=int((pow2 & (ratio < 1)).sum()))
    # scale words no cause explains: their bytes go through the byte-level fallback
    rest = differs.clone()
    rest[units[unwritten | ulp | in_cluster | pow2]] = False
    _scale_fallback(frame, ledger, rest)


def _scale_fallback(frame: _Frame, ledger: _Ledger, units: torch.Tensor) -> None:
    """Scale words that differ for no known reason (a whole word left as poison is `unwritten`, above)."""
    if bool(units.any()):
        _take_units(frame, ledger, Category.UNKNOWN, units, value=False, scale=True)


# ---- the systemic value causes, as per-byte predicates ----------------------------------------------------


def _format_match(fmt: FP8Format, base: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """bool: the candidate byte encodes the baseline's value in the other format (one code of slack for the
    double rounding at the formats' different subnormal steps). Zeros prove nothing: e4m3fnuz has no -0, so
    a -0 that lost its sign would look like a format change (it is `signed-zero`)."""
    other = _other_format(fmt)
    table = fp8.encode(torch.tensor(fp8.decode_table(fmt), device=base.device), other)
    predicted = table[base.long()]
    nan_p, nan_c = fp8.is_nan_code(predicted, other), fp8.is_nan_code(cand, other)
    # fp8.code_distance <= 1, in uint8 arithmetic: equal, both NaN, +0 against -0, or one code apart
    close = (cand == predicted) | (nan_p & nan_c) | (_zero_pair(predicted, cand) & ~nan_p & ~nan_c)
    close |= _one_code_apart(predicted, cand, other)
    return close & ~_zero_pair(base, cand)


def _cast_match(y: torch.Tensor, base: torch.Tensor, cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(match, negative) bool: the candidate byte is an integer conversion of the quotient y = x/s to uint8,
    under any convention seen on real platforms (SPEC.md section 5); negative: a negative quotient that
    wrapped (-1 -> 255) rather than became 0."""
    whole = torch.trunc(y)
    wrap = torch.remainder(whole, 256)  # numpy astype, the Triton interpreter: -1 -> 255, 300 -> 44
    finite = wrap == wrap  # NaN exactly where y is +-inf or NaN
    # the rest in bytes (half the time of float compares): a finite y's wrap is a whole number in [0, 255]
    wrap_byte = torch.where(finite, wrap, 0).to(torch.uint8)
    match = (cand == wrap_byte) & finite
    negative = whole < 0
    wrapped = match & negative
    is_zero, is_max = cand == 0, cand == 255
    match |= negative & is_zero  # NVIDIA: negatives -> 0 (and > 255 wraps, as above)
    match |= (whole > 255) & is_max  # a saturating conversion
    # floor: the seed's AMD report, -0.3 -> 255; cand + 1 wraps 255 to 0 as (wrap - 1) mod 256 takes 0 to 255
    match |= (y < whole) & (cand + 1 == wrap_byte)
    match |= ~finite & (is_zero | is_max)
    match &= ~_zero_pair(base, cand)
    return match, wrapped & match


def _cast_match_fp32(y: torch.Tensor, base: torch.Tensor, cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """_cast_match for fp32 quotients, through int32 and bytes instead of float trunc and remainder: an fp32
    |y| >= 2**31 is a whole multiple of 256 (its ulp is >= 256), so its trunc is 0 mod 256."""
    small = y.abs() < 2.0**31  # False for +-inf and NaN
    whole = torch.where(small, y, 0).to(torch.int32)  # trunc
    wrap_byte = whole.to(torch.uint8)  # the low byte: mod 256, -1 -> 255
    finite = torch.isfinite(y)
    match = (cand == wrap_byte) & finite
    negative = y <= -1  # trunc(y) < 0, -inf included
    wrapped = match & negative
    match |= negative & (cand == 0)
    match |= (y >= 256) & (cand == 255)
    match |= small & (y < whole) & (cand + 1 == wrap_byte)  # floor: a negative y off the integers
    match |= ~finite & ((cand == 0) | (cand == 255))
    match &= ~_zero_pair(base, cand)
    return match, wrapped & match


def _cast_conventions(match: torch.Tensor, wrapped: torch.Tensor, cand: torch.Tensor, y: torch.Tensor) -> dict:
    negative = match & (y <= -1)  # trunc(y) < 0, without the trunc
    return {"negative_wrap": int(torch.count_nonzero(wrapped & negative)),
            "negative_zero": int(torch.count_nonzero(negative & (cand == 0)))}


def _layout_tables(frame: _Frame, other: Layout) -> tuple[torch.Tensor, torch.Tensor]:
    """(owner_token, source_byte) [block_size, head_dim]: for the cache byte of (t, d) in the spec's layout,
    the token whose value the other layout puts there, and where the spec's layout keeps that value."""
    spec = frame.spec
    device = frame.value_index.device
    other_index = spec.replace(layout=other).value_index(device).view(-1)
    tokens = torch.arange(spec.block_size, device=device).view(-1, 1).expand(-1, spec.head_dim)
    dims = torch.arange(spec.head_dim, device=device).view(1, -1).expand(spec.block_size, -1)
    owner_t = torch.empty(spec.value_bytes, dtype=torch.int64, device=device)
    owner_d = torch.empty_like(owner_t)
    owner_t[other_index] = tokens.reshape(-1)
    owner_d[other_index] = dims.reshape(-1)
    owner_token = owner_t[frame.value_index]
    return owner_token, frame.value_index[owner_token, owner_d[frame.value_index]]


def _layout_predicted(frame: _Frame, tables, block_i: torch.Tensor, token: torch.Tensor,
                      dim: torch.Tensor) -> torch.Tensor:
    """uint8: the byte a writer using the other layout leaves at the spec's place of (token, dim): the
    baseline's value of the token it puts there, or the poison fill where no token maps."""
    spec = frame.spec
    owner_token, source_byte = tables
    slot_mapped = frame.source.view(-1, spec.block_size, spec.groups_per_token)[:, :, 0] >= 0
    owner = owner_token[token, dim]
    moved = frame.base_phys.view(-1)[block_i * spec.block_bytes + source_byte[token, dim]]
    byte = frame.value_index[token, dim]
    poison = ((byte * POISON_STEP) % 256).to(torch.uint8) + frame.poison_block[block_i]
    return torch.where(slot_mapped[block_i, owner], moved, poison)


# ---- stage 3: systemic causes of dense units, judged from samples ------------------------------------------


def _layout_blocks(frame: _Frame, ledger: _Ledger, open_u: torch.Tensor, active: set) -> torch.Tensor:
    """Judge each block's layout from a fixed grid of 8 x 8 (token, dim) positions; a re-ordered block gives
    all its open units to `layout`. Returns bool [nd]: blocks whose layout question is settled."""
    spec = frame.spec
    nd = frame.blocks.numel()
    device = frame.blocks.device
    other = other_layout(spec)
    if other is None:
        return torch.ones(nd, dtype=torch.bool, device=device)
    tables = _layout_tables(frame, other)
    tokens = torch.arange(0, spec.block_size, max(1, spec.block_size // 8), device=device)
    dims = torch.arange(0, spec.head_dim, max(1, spec.head_dim // 8), device=device)
    token = tokens.view(1, -1, 1).expand(1, -1, dims.numel()).reshape(1, -1)
    dim = dims.view(1, 1, -1).expand(1, tokens.numel(), -1).reshape(1, -1)
    byte = frame.value_index[token, dim].view(-1)
    base, cand = frame.base_phys[:, byte], frame.cand_phys[:, byte]
    block_i = torch.arange(nd, device=device).view(-1, 1)
    differs = base != cand
    match = differs & (cand == _layout_predicted(frame, tables, block_i, token, dim)) & frame.block_mapped.view(-1, 1)
    sampled, matched = differs.sum(dim=1), match.sum(dim=1)
    settled = sampled >= DENSE_SAMPLED
    moved = settled & (matched >= SAMPLE_SHARE * sampled)
    chosen = open_u & moved[frame.block_i]
    if bool(chosen.any()):
        _take_units(frame, ledger, Category.LAYOUT, chosen)
        ledger.facts[Category.LAYOUT]["found_" + other.value] = 1
        active.add(Category.LAYOUT)
        open_u &= ~chosen
    return settled


def _dense_units(frame: _Frame, ledger: _Ledger, open_u: torch.Tensor, layout_settled: torch.Tensor,
                 active: set) -> torch.Tensor:
    """Judge open units with many differing bytes from SAMPLE_COLUMNS of their columns, cause by cause, the
    cause that fits most of a small probe first. Returns the judged units that no cause fits."""
    spec = frame.spec
    qbs = spec.quant_block_size
    device = open_u.device
    # unmapped units of blocks whose layout is settled: plain stray writes
    stray = open_u & ~frame.mapped & layout_settled[frame.block_i]
    _take_units(frame, ledger, Category.STRAY_WRITE, stray)
    open_u &= ~stray

    columns = torch.arange(0, qbs, max(1, qbs // SAMPLE_COLUMNS), device=device)
    # a unit with fewer differing bytes than DENSE_SAMPLED cannot have that many differing sampled bytes
    maybe = torch.nonzero(open_u & frame.mapped & (frame.n_u >= DENSE_SAMPLED)).view(-1)
    if not maybe.numel():
        return torch.zeros_like(open_u)
    if 4 * maybe.numel() < open_u.numel():  # few: gather their rows rather than sampling every unit
        base_s = frame.value_rows(frame.base_phys, maybe)[:, columns]
        cand_s = frame.value_rows(frame.cand_phys, maybe)[:, columns]
    else:
        base_s, cand_s = frame.sample(frame.base_phys, columns), frame.sample(frame.cand_phys, columns)
        base_s, cand_s = base_s[maybe], cand_s[maybe]
    differs = base_s != cand_s
    sampled = count_rows(differs)
    keep = sampled >= DENSE_SAMPLED
    units = maybe[keep]
    if not units.numel():
        return torch.zeros_like(open_u)
    if units.numel() != maybe.numel():
        base_s, cand_s, differs, sampled = base_s[keep], cand_s[keep], differs[keep], sampled[keep]
    need = SAMPLE_SHARE * sampled
    first = slice(0, min(FIRST_COLUMNS, columns.numel()))
    # the differing sampled bytes past the first columns: the most a unit can still match after them
    past_first = sampled - differs[:, first].sum(dim=1)

    def by_share(match, rows: torch.Tensor, screen: bool):
        """(rows, per-row outputs of match on all columns) of the rows whose matching differing sampled bytes
        reach SAMPLE_SHARE. screen: first drop, exactly, the rows that cannot reach it whatever their other
        columns hold (random bytes: nearly all after 3 columns)."""
        if screen and rows.numel():
            matched = match(rows, first)[0].sum(dim=1)
            rows = rows[matched + past_first[rows] >= need[rows]]
        fits, counts = [], []
        for start in range(0, rows.numel(), JUDGE_ROWS):
            part = rows[start : start + JUDGE_ROWS]
            matched, *facts = match(part, slice(None))
            fits.append(count_rows(matched) >= need[part])
            counts.append(facts)
        if not fits:
            return rows, []
        fits = torch.cat(fits)
        return rows[fits], [torch.cat(c)[fits] for c in zip(*counts)]

    # each judge: (rows: indices into `units`, screen) -> (the rows the cause fits, facts of those rows)
    def unwritten(rows: torch.Tensor, screen: bool) -> tuple[torch.Tensor, dict]:
        def poison_cols(r, cols):
            u = units[r]
            rows_poison = frame.poison_row[:, columns[cols]].index_select(0, u % frame.poison_row.shape[0])
            return (cand_s[r, cols] == rows_poison + frame.poison_block[frame.block_i[u]].view(-1, 1)).all(dim=1)
        if screen:
            rows = rows[poison_cols(rows, first)]
        rows = rows[poison_cols(rows, slice(None))]
        u = units[rows]
        rows = rows[(frame.value_rows(frame.cand_phys, u) == frame.poison_rows(u)).all(dim=1)]
        return rows, {"units": rows.numel()}

    codes = torch.arange(256, dtype=torch.uint8, device=device)
    format_table = _format_match(spec.fp8, codes.repeat_interleave(256), codes.repeat(256))

    def fp8_format(rows: torch.Tensor, screen: bool) -> tuple[torch.Tensor, dict]:
        def match(r, cols):
            key = base_s[r, cols].int().bitwise_left_shift_(8).bitwise_or_(cand_s[r, cols])
            return (format_table.index_select(0, key.view(-1)).view(key.shape) & differs[r, cols],)
        return by_share(match, rows, screen)[0], {}

    # frame.x and frame.quotient_scale of the units, by rows: row k_row of k.view(-1, qbs) holds a unit's x
    k_rows = frame.k.view(-1, qbs)
    k_row = frame.source[units].clamp(min=0) * spec.groups_per_token + frame.group[units]
    quotient_scale = frame.quotient_scale(units)
    k_sample: list = []  # k at the sampled columns, gathered once a judge needs all columns of many units

    def integer_cast(rows: torch.Tensor, screen: bool) -> tuple[torch.Tensor, dict]:
        def match(r, cols):
            if cols == slice(None) and not screen and rows.numel() > PROBE_UNITS:  # most of them fit
                if not k_sample:
                    k_sample.append(k_rows[:, columns].float())
                x = k_sample[0].index_select(0, k_row[r])
            else:
                x = k_rows[k_row[r].view(-1, 1), columns[cols].view(1, -1)].float()
            y = x / quotient_scale[r].view(-1, 1)
            cand = cand_s[r, cols]
            matched, wrapped = _cast_match_fp32(y, base_s[r, cols], cand)
            matched &= differs[r, cols]
            negative = matched & (y <= -1)  # _cast_conventions, per row
            return matched, (negative & wrapped).sum(dim=1), (negative & (cand == 0)).sum(dim=1)
        rows, facts = by_share(match, rows, screen)
        wrap, zero = (int(f.sum()) for f in facts) if facts else (0, 0)
        return rows, {"negative_wrap": wrap, "negative_zero": zero}

    judges = {Category.UNWRITTEN: unwritten, Category.FP8_FORMAT: fp8_format, Category.INTEGER_CAST: integer_cast}
    probe = torch.arange(0, units.numel(), max(1, units.numel() // PROBE_UNITS), device=device)
    likely = {category: judge(probe, False)[0].numel() for category, judge in judges.items()}
    left = torch.ones(units.numel(), dtype=torch.bool, device=device)
    for category in sorted(judges, key=lambda c: -likely[c]):  # stable: ties keep the documented order
        rows = torch.nonzero(left).view(-1)
        if not rows.numel():
            break
        # screen where the probe says most rows will not fit: it costs a pass over the first columns
        chosen, facts = judges[category](rows, 2 * likely[category] < probe.numel())
        if not chosen.numel():
            continue
        _take_units(frame, ledger, category, _units_mask(frame, units[chosen]))
        ledger.note(category, **facts)
        active.add(category)
        left[chosen] = False
    open_u &= ~_units_mask(frame, units)
    # no systemic cause fits: split the unit byte by byte only where byte-local causes explain at least half
    # of its sampled bytes; otherwise it is garbage, and a byte of it one code from the baseline by chance
    # is no rounding
    rows = torch.nonzero(left).view(-1)
    u = units[rows]
    poison = frame.poison_row[:, columns].index_select(0, u % frame.poison_row.shape[0]) + \
        frame.poison_block[frame.block_i[u]].view(-1, 1)
    fits = _byte_local_fits(spec.fp8, base_s[rows], cand_s[rows], poison, frame.wdiff_u[u].view(-1, 1) == 0)
    split = 2 * count_rows(fits & differs[rows]) >= sampled[rows]
    _take_units(frame, ledger, Category.UNKNOWN, _units_mask(frame, u[~split]))
    return _units_mask(frame, u[split])


def _byte_local_fits(fmt: FP8Format, base: torch.Tensor, cand: torch.Tensor, poison: torch.Tensor,
                     same_scale: torch.Tensor) -> torch.Tensor:
    """bool: a byte-local cause may explain the byte (a superset: the clipped test needs x/s)."""
    # the byte-pair part, looked up in a table of all 65536 pairs: 1 fits, 2 fits if the scales are equal
    codes = torch.arange(256, dtype=torch.uint8, device=base.device)
    table = _byte_local_pairs(fmt, codes.repeat_interleave(256), codes.repeat(256))
    pair = table.index_select(0, base.int().bitwise_left_shift_(8).bitwise_or_(cand).view(-1)).view(base.shape)
    return (pair == 1) | ((pair == 2) & same_scale) | (cand == poison) | (base == poison)


def _byte_local_pairs(fmt: FP8Format, base: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
    """uint8: 1 where signed-zero or saturation-nan may explain the pair, 2 where only rounding may, else 0."""
    top, bottom = _fp8_max_codes(fmt)
    extreme = (base == top) | (base == bottom) | (cand == top) | (cand == bottom)
    extreme |= fp8.is_nan_code(base, fmt) | fp8.is_nan_code(cand, fmt)
    always = _zero_pair(base, cand) | extreme
    return torch.where(always, 1, torch.where(_one_code_apart(base, cand, fmt), 2, 0)).to(torch.uint8)


# ---- stage 4: byte by byte ---------------------------------------------------------------------------


@dataclass
class _Bytes:
    """Differing value bytes still to be explained: a list (unit [N], column [N], bytes [N]) of the few
    bytes of sparse units, or a dense chunk (unit [n, 1], column [1, qbs], bytes [n, qbs]) of units."""

    unit: torch.Tensor
    column: torch.Tensor
    base: torch.Tensor
    cand: torch.Tensor
    left: torch.Tensor  # bool, like base: differs and not explained yet

    @property
    def dense(self) -> bool:
        return self.base.dim() == 2

    @classmethod
    def listed(cls, frame: _Frame, units: torch.Tensor) -> "_Bytes":
        index = torch.nonzero(units).view(-1)
        base_rows, cand_rows = frame.value_rows(frame.base_phys, index), frame.value_rows(frame.cand_phys, index)
        rows, column = torch.nonzero(base_rows != cand_rows, as_tuple=True)
        base, cand = base_rows[rows, column], cand_rows[rows, column]
        return cls(index[rows], column, base, cand, torch.ones_like(base, dtype=torch.bool))

    @classmethod
    def chunk(cls, frame: _Frame, units: torch.Tensor) -> "_Bytes":
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

    def take(self, frame: _Frame, ledger: _Ledger, category: Category, mask: torch.Tensor) -> None:
        mask = mask & self.left
        count = int(torch.count_nonzero(mask))
        if not count:
            return
        if self.dense:
            hit = any_rows(mask)
            units = self.unit.view(-1)[hit]
            examples = []
            for row in _first(hit).tolist():
                column = int(torch.argmax(mask[row].to(torch.uint8)))
                examples.append(("cache", int(frame.value_flat(self.unit[row, 0], torch.tensor(column)))))
        else:
            first = _first(mask)
            examples = [("cache", int(i)) for i in frame.value_flat(self.unit[first], self.column[first]).tolist()]
            units = self.unit[mask]
        ledger.add(category, count, frame.blocks[frame.block_i[units]], examples)
        self.left &= ~mask


def _gate(keys: torch.Tensor, match: torch.Tensor, left: torch.Tensor, size: int, minimum: int) -> torch.Tensor:
    """bool per byte: its key (unit or block) has >= minimum matching bytes and they are half its bytes left."""
    matches = torch.zeros(size, dtype=torch.int64, device=keys.device).index_add_(0, keys, (match & left).long())
    total = torch.zeros_like(matches).index_add_(0, keys, left.long())
    ok = (matches >= minimum) & (2 * matches >= total)
    return ok[keys] & match & left


def _byte_by_byte(frame: _Frame, ledger: _Ledger, units: torch.Tensor, layout_settled: torch.Tensor,
                  active: set) -> None:
    """Sparse units: the systemic causes byte by byte, each gated per unit (layout: per block), then the
    byte-local causes."""
    if not bool(units.any()):
        return
    spec = frame.spec
    b = _Bytes.listed(frame, units)
    num_units = frame.n_u.numel()
    mapped = frame.source[b.unit] >= 0

    def minimum(category: Category) -> int:
        return 1 if category in active else MIN_MATCHES

    other = other_layout(spec)
    open_blocks = ~layout_settled[frame.block_i[b.unit]] & frame.block_mapped[frame.block_i[b.unit]]
    if other is not None and bool(open_blocks.any()):
        dim = frame.group[b.unit] * spec.quant_block_size + b.column
        predicted = _layout_predicted(frame, _layout_tables(frame, other), frame.block_i[b.unit], frame.token[b.unit], dim)
        chosen = _gate(frame.block_i[b.unit], open_blocks & (b.cand == predicted), b.left, frame.blocks.numel(),
                       minimum(Category.LAYOUT))
        if bool(chosen.any()):
            ledger.facts[Category.LAYOUT]["found_" + other.value] = 1
        b.take(frame, ledger, Category.LAYOUT, chosen)
    b.take(frame, ledger, Category.STRAY_WRITE, ~mapped)

    # units whose every byte still holds the poison fill
    poison = b.left & (b.cand == frame.value_poison(b.unit, b.column))
    whole = torch.zeros(num_units, dtype=torch.bool, device=b.unit.device)
    whole[b.unit[poison]] = True
    whole[b.unit[b.left & ~poison]] = False
    if bool(whole.any()):
        index = torch.nonzero(whole).view(-1)
        whole[index] = (frame.value_rows(frame.cand_phys, index) == frame.poison_rows(index)).all(dim=1)
        ledger.note(Category.UNWRITTEN, units=int(whole.sum()))
        b.take(frame, ledger, Category.UNWRITTEN, whole[b.unit])

    match = _format_match(spec.fp8, b.base, b.cand) & mapped
    b.take(frame, ledger, Category.FP8_FORMAT, _gate(b.unit, match, b.left, num_units, minimum(Category.FP8_FORMAT)))
    if bool((b.left & mapped).any()):
        y = frame.x(b.unit, b.column) / frame.quotient_scale(b.unit)
        cast, wrapped = _cast_match(y, b.base, b.cand)
        chosen = _gate(b.unit, cast & mapped, b.left, num_units, minimum(Category.INTEGER_CAST))
        if bool(chosen.any()):
            ledger.note(Category.INTEGER_CAST, **_cast_conventions(chosen, wrapped, b.cand, y))
        b.take(frame, ledger, Category.INTEGER_CAST, chosen)
    _byte_local(frame, ledger, b)


def _one_code_apart(base: torch.Tensor, cand: torch.Tensor, fmt: FP8Format) -> torch.Tensor:
    """fp8.code_distance(base, cand) == 1, in uint8 arithmetic (a third of its cost on big chunks): same
    sign and magnitudes one apart, or opposite signs with magnitudes 0 and 1; never a NaN."""
    mb, mc = base & 0x7F, cand & 0x7F
    same_sign = ((base ^ cand) & 0x80) == 0
    apart = torch.where(same_sign, ((mb - mc) == 1) | ((mc - mb) == 1), (mb + mc) == 1)
    return apart & ~fp8.is_nan_code(base, fmt) & ~fp8.is_nan_code(cand, fmt)


def _byte_local(frame: _Frame, ledger: _Ledger, b: _Bytes) -> None:
    """signed-zero, saturation-nan, rounding, poison, unknown: each byte on its own."""
    fmt = frame.spec.fp8
    base, cand = b.base, b.cand
    zero = _zero_pair(base, cand) & b.left
    if bool(zero.any()):
        ledger.note(Category.SIGNED_ZERO, candidate_negative=int(torch.count_nonzero(zero & (cand == 0x80))),
                    baseline_negative=int(torch.count_nonzero(zero & (base == 0x80))))
        b.take(frame, ledger, Category.SIGNED_ZERO, zero)

    top, bottom = _fp8_max_codes(fmt)
    base_nan, cand_nan = fp8.is_nan_code(base, fmt), fp8.is_nan_code(cand, fmt)
    base_max, cand_max = (base == top) | (base == bottom), (cand == top) | (cand == bottom)
    nan_vs_max = ((base_nan & cand_max) | (cand_nan & base_max)) & b.left
    if bool(nan_vs_max.any()):
        ledger.note(Category.SATURATION_NAN, candidate_nan=int(torch.count_nonzero(nan_vs_max & cand_nan)),
                    baseline_nan=int(torch.count_nonzero(nan_vs_max & base_nan)))
        b.take(frame, ledger, Category.SATURATION_NAN, nan_vs_max)
    # clipped vs unclipped: one side +-max, the other a finite code of the same sign, and |x/s| > max
    same_scale = frame.wdiff_u[b.unit] == 0
    maybe = b.left & (base_max ^ cand_max) & ~base_nan & ~cand_nan & (((base ^ cand) & 0x80) == 0)
    maybe &= same_scale & (frame.source[b.unit] >= 0)
    if bool(maybe.any()):
        unit, column, index = b.entries(maybe)
        clipped = torch.zeros_like(maybe)
        clipped.view(-1)[index] = (frame.x(unit, column) / frame.base_w[unit]).abs() > fmt.max
        b.take(frame, ledger, Category.SATURATION_NAN, clipped)

    rounding = _one_code_apart(base, cand, fmt) & same_scale & b.left
    if bool(rounding.any()):
        unit, column, index = b.entries(rounding)
        # a tie of the rounding mode: the exact x/s (bf16 x and fp32 s are exact in fp64) is a midpoint and
        # both fp32 quotients (x / s and x * (1/s)) hit it, so no writer's quotient moved it off the tie
        x, s = frame.x(unit, column), frame.base_w[unit]
        y = x.double() / s.double()
        pair_base, pair_cand = base.reshape(-1)[index], cand.reshape(-1)[index]
        tie = (2 * y == fp8.decode(pair_base, fmt).double() + fp8.decode(pair_cand, fmt).double())
        tie &= ((x / s).double() == y) & ((x * (1 / s)).double() == y) & (frame.source[unit] >= 0)
        ledger.note(Category.ROUNDING, ties=int(tie.sum()), ties_candidate_even=int((tie & (pair_cand % 2 == 0)).sum()),
                    ties_baseline_even=int((tie & (pair_base % 2 == 0)).sum()))
        b.take(frame, ledger, Category.ROUNDING, rounding)

    if b.dense:
        poison = frame.poison_rows(b.unit.view(-1))
    else:
        poison = frame.value_poison(b.unit, b.column)
    base_poison = (base == poison) & b.left
    left_poison = ((cand == poison) & b.left) | base_poison
    if bool(left_poison.any()):
        ledger.note(Category.UNWRITTEN, baseline_bytes=int(torch.count_nonzero(base_poison)))
        b.take(frame, ledger, Category.UNWRITTEN, left_poison)
    b.take(frame, ledger, Category.UNKNOWN, b.left)


def _dense_byte_local(frame: _Frame, ledger: _Ledger, units: torch.Tensor) -> None:
    """Dense units that no systemic cause fits but byte-local causes may: byte by byte, in chunks of units,
    so a cache full of them never becomes a list of 100M bytes."""
    index = torch.nonzero(units).view(-1)
    chunk = max(1, CHUNK_BYTES // frame.spec.quant_block_size)
    for start in range(0, index.numel(), chunk):
        _byte_local(frame, ledger, _Bytes.chunk(frame, index[start : start + chunk]))


# ---- the entry point ---------------------------------------------------------------------------------------


def diagnose(spec: CacheSpec, baseline: CacheBuffer, candidate: CacheBuffer, inputs: Inputs, *,
             diff: DiffResult | None = None) -> Diagnosis:
    """Attribute every byte that differs between the two caches (guard bytes included) to one cause.

    `diff`: diff_caches' result for these two caches, if at hand; its per-block counts say which blocks to
    read (the attribution is the same without it)."""
    ledger = _Ledger()
    _guards(baseline, candidate, ledger, spec.num_blocks * spec.block_bytes)
    blocks, a, b, n_u, wdiff_u = _differing_units(spec, baseline, candidate, diff)
    frame = None
    expected = int(torch.count_nonzero(baseline.guards != candidate.guards))
    if blocks.numel():
        frame = _frame(spec, inputs, blocks, a, b, n_u, wdiff_u)
        expected += int(frame.n_u.sum() + frame.wdiff_u.sum())
        open_u = frame.n_u > 0
        active: set = set()
        _unmapped(frame, ledger, open_u)
        _scales(frame, ledger, open_u)
        layout_settled = _layout_blocks(frame, ledger, open_u, active)
        leftovers = _dense_units(frame, ledger, open_u, layout_settled, active)
        _byte_by_byte(frame, ledger, open_u, layout_settled, active)
        _dense_byte_local(frame, ledger, leftovers)
    found = sum(ledger.bytes.values())
    if found != expected:
        raise DiagnosisError(f"diagnosis accounts for {found} bytes but {expected} differ: {dict(ledger.bytes)}")
    return Diagnosis(_causes(spec, ledger, frame, baseline, candidate))


# ---- from the ledger to causes ------------------------------------------------------------------------


def _causes(spec: CacheSpec, ledger: _Ledger, frame: _Frame | None, baseline: CacheBuffer,
            candidate: CacheBuffer) -> tuple[Cause, ...]:
    causes = []
    for category, count in ledger.bytes.items():
        parts = ledger.blocks.get(category)
        blocks = tuple(torch.unique(torch.cat(parts)).tolist()) if parts else ()
        facts = ledger.facts[category]
        explanation, hint = _explain(spec, category, count, facts)
        examples = tuple(_example(spec, category, kind, index, frame, baseline, candidate)
                         for kind, index in ledger.examples[category])
        causes.append(Cause(category, count, blocks, explanation, hint, examples))
    order = list(Category)
    return tuple(sorted(causes, key=lambda c: (-c.bytes, order.index(c.category))))


def _example(spec: CacheSpec, category: Category, kind: str, index: int, frame: _Frame | None,
             baseline: CacheBuffer, candidate: CacheBuffer) -> Example:
    if kind == "guard":
        position = baseline.guard_bytes + index  # guards = [front | back]; offsets -guard..-1, then 0..guard-1
        return Example(None, index, int(baseline.guards[position]), int(candidate.guards[position]), None, None,
                       "outside the cache handed to the writer")
    m = mismatch_at(spec, baseline.flat, candidate.flat, index)
    note = _note(spec, category, m, frame) if frame is not None else None
    return Example(m.coordinate, None, m.baseline_byte, m.candidate_byte, m.baseline_value, m.candidate_value, note)


def _note(spec: CacheSpec, category: Category, m: Mismatch, frame: _Frame) -> str | None:
    """What fits at one example byte: the quotient, the moved token, the other format's value, the scales."""
    c = m.coordinate
    block_i = int(torch.searchsorted(frame.blocks, torch.tensor(c.block, device=frame.blocks.device)))
    group = c.group if c.group is not None else c.dim // spec.quant_block_size
    unit = (block_i * spec.block_size + c.token) * spec.groups_per_token + group
    source = int(frame.source[unit])
    if category is Category.STRAY_WRITE:
        return "no token maps to this slot"
    if category is Category.UNWRITTEN:
        return "the poison fill is still there"
    if c.region is Region.SCALE:
        base, cand = float(frame.base_w[unit]), float(frame.cand_w[unit])
        ratio = f", x{cand / base:.6g}" if base and math.isfinite(base) and math.isfinite(cand) else ""
        return f"scales {base:g} vs {cand:g}{ratio}"
    if source < 0:
        return None
    x = float(frame.k[source, c.dim].float())
    s = float(frame.quotient_scale(torch.tensor(unit)))
    y = x / s if s else math.nan
    if category is Category.INTEGER_CAST:
        whole = math.trunc(y) if math.isfinite(y) else None
        return f"x/s = {y:.6g}" + (f", trunc {whole} = 0x{whole % 256:02x} mod 256" if whole is not None else "")
    if category is Category.LAYOUT:
        other = other_layout(spec)
        owner = spec.replace(layout=other).locate(c.block * spec.block_bytes + c.byte_in_block)
        return f"the {other.value} layout puts token {owner.token}, dim {owner.dim} at this byte"
    if category is Category.FP8_FORMAT:
        other = _other_format(spec.fp8)
        return f"0x{m.candidate_byte:02x} is {fp8.decode_byte(m.candidate_byte, other):g} in {other.value}"
    if category in (Category.SCALE_RATIO, Category.SCALE_POW2, Category.SCALE_ULP):
        base, cand = float(frame.base_w[unit]), float(frame.cand_w[unit])
        return f"this group's scales: {base:g} vs {cand:g}"
    if category is Category.ROUNDING:
        x32, s32 = torch.tensor(x, dtype=torch.float32), torch.tensor(s, dtype=torch.float32)
        return (f"x = {x:g}, x/s = {y!r} exactly; in fp32 x / s = {float(x32 / s32)!r},"
                f" x * (1/s) = {float(x32 * (1 / s32))!r}")
    return f"x = {x:g}, x/s = {y!r}"


def _ratio_divisors(ratio: float, ue8m0: bool) -> list[tuple[float, float]]:
    """(baseline DIV, candidate DIV) pairs of KNOWN_DIVISORS that explain candidate/baseline = ratio;
    s = amax / DIV, so the ratio is baseline DIV / candidate DIV (ue8m0: up to the power-of-two rounding)."""
    pairs = []
    for a in KNOWN_DIVISORS:
        for b in KNOWN_DIVISORS:
            if a == b:
                continue
            off = abs(math.log2(a / b) - math.log2(ratio))
            if off < 1e-4 or (ue8m0 and off < 1):
                pairs.append((off, a, b))
    return [(a, b) for _, a, b in sorted(pairs)][:2]


def _explain(spec: CacheSpec, category: Category, count: int, facts: Counter) -> tuple[str, str | None]:
    """One sentence saying what was found (the bytes and blocks are the cause's own fields), and a hint."""
    fmt = spec.fp8.value
    moved = " (the values of those groups move with their scale)"
    if category is Category.UNWRITTEN:
        tokens = facts["units"] // spec.groups_per_token
        whole = f", {tokens} token{'s' if tokens != 1 else ''} never written at all" if tokens else ""
        base_side = facts["baseline_bytes"] + facts["baseline_scale_words"]
        side = "; in some, the baseline left poison where the candidate wrote" if base_side else ""
        return (f"The candidate left the poison fill where the baseline wrote{whole}{side}.",
                "every token with slot >= 0 must be written: check that the grid covers all tokens")
    if category is Category.STRAY_WRITE:
        guard = facts["guard"]
        where = [f"{guard} outside the cache (guard bytes)"] if guard else []
        if count - guard:
            where.append(f"{count - guard} in slots no token maps to")
        return (f"Bytes changed where no slot maps: {', '.join(where)}.",
                "tokens with slot < 0 must write nothing, and every store must stay inside the cache")
    if category is Category.INTEGER_CAST:
        if facts["negative_zero"] > facts["negative_wrap"]:
            convention = "truncated toward zero, negatives to 0, over 255 wrapped: NVIDIA's conversion"
        elif facts["negative_wrap"]:
            convention = "truncated toward zero, negatives wrapped mod 256 (-1 -> 255): numpy, the Triton interpreter"
        else:
            convention = "truncated toward zero"
        return (f"Value bytes are x/s converted to an integer ({convention}), not FP8 codes: the value region was"
                " not viewed as FP8.",
                f"view the value region as {spec.fp8.torch_dtype()} before launching (a uint8 view turns the"
                " kernel's cast into a float -> uint8 conversion)")
    if category is Category.LAYOUT:
        found = next((key[len("found_"):] for key in facts if key.startswith("found_")), "another")
        return (f"The values are right but stored in {found} order; the spec expects {spec.layout.value} order.",
                f"write the value region in {spec.layout.value} order (vLLM: shuffle when block_size > 1, linear when"
                f" 1), or check with --layout {found} if that is what the reader expects")
    if category is Category.FP8_FORMAT:
        other = _other_format(spec.fp8)
        return (f"Value bytes encode the right values in {other.value}, not {fmt}.",
                f"cast to {spec.fp8.torch_dtype()}; vLLM picks e4m3fnuz only on gfx94* (MI300, MI325)")
    if category is Category.SCALE_RATIO:
        ratio = facts.get("ratio", float("nan"))
        pairs = _ratio_divisors(ratio, spec.scale_fmt is ScaleFormat.UE8M0) if math.isfinite(ratio) and ratio > 0 else []
        suggestion = " or ".join(
            f"DIV {a:g} ({KNOWN_DIVISORS[a]}) in the baseline against {b:g} ({KNOWN_DIVISORS[b]}) in the candidate"
            for a, b in pairs)
        return (f"Candidate scales are {ratio:.6g}x the baseline's{moved}.",
                (f"s = amax / DIV: the ratio suggests {suggestion}" if suggestion else
                 "compare the two writers' DIV in s = max(amax, 1e-4) / DIV") + " (SPEC.md section 3)")
    if category is Category.SCALE_POW2:
        direction = "2x" if facts["doubled"] >= facts["halved"] else "half"
        return (f"ue8m0 scales are exactly {direction} the baseline's on groups whose amax / DIV sits on a power of"
                f" two: the ceil flipped{moved}.",
                "compute s = amax / DIV with an exact division (tl.math.div_rn; Triton's `/` is approximate on"
                " NVIDIA) before ceil(log2(s))")
    if category is Category.SCALE_ULP:
        return (f"fp32 scales differ in their last bits (at most {facts['max_ulp']} ulp){moved}.",
                "compute s = max(amax, 1e-4) / DIV with one IEEE division, as the reference does (not"
                " amax * (1/DIV) or an approximate division)")
    if category is Category.ROUNDING:
        ties = facts["ties"]
        if ties and ties >= 0.9 * count:
            even = "baseline" if facts["ties_baseline_even"] >= facts["ties_candidate_even"] else "candidate"
            odd = "candidate" if even == "baseline" else "baseline"
            return (f"Value codes are one apart with equal scales, at exact ties: the {even} rounds ties to even, the"
                    f" {odd} does not (e.g. away from zero).",
                    "round to nearest, ties to even, after clamping to +-max (SPEC.md section 4)")
        at_ties = f" ({ties} at exact ties)" if ties else ""
        return (f"Value codes are one apart with equal scales{at_ties}: the two writers' fp32 quotients x/s differ"
                " in the last bit.",
                "compute values as the baseline does: aiter multiplies by fl(1/s), vLLM divides x / s (with ue8m0"
                " scales both are exact)")
    if category is Category.SATURATION_NAN:
        nan_side = "candidate" if facts["candidate_nan"] >= facts["baseline_nan"] else "baseline"
        return (f"Value bytes are +-max on one side and NaN or an unclipped code on the other (the {nan_side} has"
                " the NaNs).",
                f"clamp x/s to +-{spec.fp8.max:g} before the FP8 cast (torch before 2.13 and the Triton interpreter"
                " do not saturate)")
    if category is Category.SIGNED_ZERO:
        negative = "candidate" if facts["candidate_negative"] >= facts["baseline_negative"] else "baseline"
        hint = ("a -0.0 encodes as 0x80 in e4m3fn: keep the sign bit of zero" if spec.fp8 is FP8Format.E4M3FN
                else "e4m3fnuz has no -0 (0x80 is its only NaN): a -0.0 must become 0x00")
        return f"Zeros differ in sign: 0x00 on one side, 0x80 on the other (the {negative} has 0x80).", hint
    return "These bytes fit no known cause; the examples show both sides.", None
