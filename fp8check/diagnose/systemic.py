"""Stage 3: systemic value causes: each block's order judged from a fixed grid of positions, each dense unit
(many differing bytes) from SAMPLE_COLUMNS of its columns. Pure: they return claims and the units they took."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from ..core import fp8, pairs
from ..core.diff import count_true
from ..core.spec import Layout
from .claims import Claim, note, unit_claim
from .frame import Frame, other_layout
from .model import Category

SAMPLE_COLUMNS = 8  # columns of each unit looked at to judge a systemic cause
DENSE_SAMPLED = 6  # sampled differing bytes that make a unit judged by its sample
SAMPLE_SHARE = 0.75  # share of the sampled differing bytes a systemic cause must explain
PROBE_UNITS = 1024  # dense units tried with every cause first, to try the likely cause first on all
FIRST = slice(0, 3)  # sampled columns a dense judge tries first: 3 non-fitting differing bytes rule a unit out
JUDGE_ROWS = 1 << 16  # dense units judged per step, so a step's temporaries stay in the CPU cache


# ---- another order of the same bytes: value layout, or interleaved against planar -------------------------

ARRANGEMENT_SAMPLES = 256  # byte positions of a block looked at to judge its arrangement


def other_tables(spec, other: Layout, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(owner_token, source_byte) [block_bytes]: for each byte of a block written in the `other` layout, the
    token whose byte lands there and where the spec's layout keeps that byte (all from CacheSpec)."""
    theirs = spec.replace(layout=other)
    owner = torch.full((spec.block_bytes,), -1, dtype=torch.int64, device=device)
    source = torch.full_like(owner, -1)
    tokens = torch.arange(spec.block_size, device=device)
    owner[theirs.value_index(device).view(-1)] = tokens.repeat_interleave(spec.head_dim)
    source[theirs.value_index(device).view(-1)] = spec.value_index(device).view(-1)
    owner[theirs.scale_index(device).view(-1)] = tokens.repeat_interleave(4 * spec.groups_per_token)
    source[theirs.scale_index(device).view(-1)] = spec.scale_index(device).view(-1)
    return owner, source


def other_predicted(frame: Frame, tables, block_i: torch.Tensor, byte: torch.Tensor) -> torch.Tensor:
    """uint8: the byte a writer using the other layout leaves at `byte` of the differing blocks block_i: the
    baseline's byte of the token it puts there, or the poison fill where no token maps."""
    spec = frame.spec
    owner, source = tables
    slot_mapped = frame.source.view(-1, spec.block_size, spec.groups_per_token)[:, :, 0] >= 0
    moved = frame.base_phys[block_i, source[byte]]
    return torch.where(slot_mapped[block_i, owner[byte]], moved, frame.block_poison(block_i, byte))


def _reordered(frame: Frame, tables, byte: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(settled, reordered), bool [nd]: the block has DENSE_SAMPLED differing bytes among `byte`, and the other
    layout (tables: other_tables) explains SAMPLE_SHARE of them in a block some token maps into."""
    block_i = torch.arange(frame.blocks.numel(), device=byte.device).view(-1, 1)
    base, cand = frame.base_phys[:, byte], frame.cand_phys[:, byte]
    differs = base != cand
    sampled = differs.sum(dim=1)
    matched = (differs & (cand == other_predicted(frame, tables, block_i, byte.view(1, -1)))).sum(dim=1)
    settled = sampled >= DENSE_SAMPLED
    return settled, settled & frame.block_mapped & (matched >= SAMPLE_SHARE * sampled)


def layout_blocks(frame: Frame, open_u: torch.Tensor) -> tuple[list[Claim], torch.Tensor, torch.Tensor]:
    """Judge each block's layout from a fixed grid of 8 x 8 (token, dim) positions; a re-ordered block gives
    all its open units to `layout`. Returns (claims, units taken, bool [nd]: blocks whose layout question is
    settled)."""
    spec, device = frame.spec, frame.blocks.device
    if (other := other_layout(spec)) is None:
        return [], torch.zeros_like(open_u), torch.ones(frame.blocks.numel(), dtype=torch.bool, device=device)
    tokens = torch.arange(0, spec.block_size, max(1, spec.block_size // 8), device=device)
    dims = torch.arange(0, spec.head_dim, max(1, spec.head_dim // 8), device=device)
    byte = frame.value_index[tokens.view(-1, 1), dims.view(1, -1)].view(-1)
    settled, moved = _reordered(frame, other_tables(spec, other, device), byte)
    chosen = open_u & moved[frame.block_i]
    if not bool(chosen.any()):
        return [], torch.zeros_like(open_u), settled
    claims = [unit_claim(frame, Category.LAYOUT, chosen), Claim(Category.LAYOUT, found={"layout_found": other.value})]
    return claims, chosen, settled


def arrangement_blocks(frame: Frame) -> tuple[list[Claim], torch.Tensor]:
    """Blocks written token-interleaved where the spec is planar, or planar where it is interleaved, judged from
    a fixed sample of byte positions: a re-arranged block gives all its differing bytes, values and scales, to
    `layout` (the two agree at block_size 1). Returns (claims, units taken: bool [U])."""
    spec = frame.spec
    taken = torch.zeros_like(frame.n_u, dtype=torch.bool)
    if spec.block_size == 1:
        return [], taken
    other = Layout.LINEAR if spec.layout is Layout.INTERLEAVED else Layout.INTERLEAVED
    tables = other_tables(spec, other, taken.device)
    byte = torch.arange(0, spec.block_bytes, max(1, spec.block_bytes // ARRANGEMENT_SAMPLES), device=taken.device)
    _, rearranged = _reordered(frame, tables, byte[tables[0][byte] >= 0])
    if not bool(rearranged.any()):
        return [], taken
    taken = rearranged[frame.block_i] & ((frame.n_u > 0) | (frame.wdiff_u > 0))
    return [unit_claim(frame, Category.LAYOUT, taken, value=True, scale=True),
            Claim(Category.LAYOUT, found={"layout_found": other.value})], taken


# ---- the sample of dense units, and one judge per cause ------------------------------------------------------


@dataclass(frozen=True)
class _Sample:
    """Dense units (those with >= DENSE_SAMPLED differing sampled bytes) at SAMPLE_COLUMNS of their columns."""

    frame: Frame
    units: torch.Tensor  # int64 [n]
    columns: torch.Tensor  # int64 [C]
    base: torch.Tensor  # uint8 [n, C]
    cand: torch.Tensor
    differs: torch.Tensor  # bool [n, C]
    sampled: torch.Tensor  # int64 [n]: differing sampled bytes


def _sample(frame: Frame, candidates: torch.Tensor, open_count: int) -> _Sample | None:
    """The sample of the candidate units (int64) that have enough differing sampled bytes; None if none."""
    qbs = frame.spec.quant_block_size
    columns = torch.arange(0, qbs, max(1, qbs // SAMPLE_COLUMNS), device=candidates.device)
    both = (frame.base_phys, frame.cand_phys)
    if 4 * candidates.numel() < open_count:  # few: gather their rows rather than sampling every unit
        base, cand = (frame.value_rows(phys, candidates)[:, columns] for phys in both)
    else:  # the sampled columns of every unit, read where the bytes lie
        index = frame.value_index.view(-1, qbs)[:, columns].reshape(-1)
        base, cand = (phys[:, index].view(-1, columns.numel())[candidates] for phys in both)
    differs = base != cand
    sampled = count_true(differs)
    keep = sampled >= DENSE_SAMPLED
    if not bool(keep.any()):
        return None
    if not bool(keep.all()):
        candidates, base, cand, differs, sampled = (t[keep] for t in (candidates, base, cand, differs, sampled))
    return _Sample(frame, candidates, columns, base, cand, differs, sampled)


def _by_share(s: _Sample, rows: torch.Tensor, screen: bool, match, names=(), aux=None) -> tuple[torch.Tensor, dict]:
    """(the rows whose matching differing sampled bytes reach SAMPLE_SHARE, {name: its count summed over them})
    of match(s, rows, cols, aux) -> (bool [r, c], int64 [r] per name). screen: first drop, exactly, the rows that
    cannot reach it whatever their other columns hold (random bytes: nearly all after 3 columns)."""
    if screen and rows.numel():  # the most a row can still match: its matches in FIRST and every other byte
        most = match(s, rows, FIRST, aux)[0].sum(dim=1) + s.sampled[rows] - s.differs[rows, FIRST].sum(dim=1)
        rows = rows[most >= SAMPLE_SHARE * s.sampled[rows]]
    fits, counts = [], []
    for start in range(0, rows.numel(), JUDGE_ROWS):
        part = rows[start : start + JUDGE_ROWS]
        matched, *facts = match(s, part, slice(None), aux)
        fits.append(count_true(matched) >= SAMPLE_SHARE * s.sampled[part])
        counts.append(facts)
    if not fits:
        return rows, {}
    fits = torch.cat(fits)
    return rows[fits], {name: int(torch.cat(c)[fits].sum()) for name, c in zip(names, zip(*counts))}


def _judge_unwritten(s: _Sample, rows: torch.Tensor, screen: bool) -> tuple[torch.Tensor, dict]:
    """Units whose every value byte in the candidate is still the poison fill."""
    frame = s.frame
    for cols in (FIRST, slice(None)) if screen else (slice(None),):
        rows = rows[(s.cand[rows, cols] == frame.value_poison(s.units[rows].view(-1, 1), s.columns[cols])).all(dim=1)]
    u = s.units[rows]
    rows = rows[(frame.value_rows(frame.cand_phys, u) == frame.value_poison(u)).all(dim=1)]
    return rows, {"units": rows.numel()}


def _format_columns(s: _Sample, r: torch.Tensor, cols, aux):
    """The sampled bytes that encode the baseline's values in the other FP8 format."""
    table = pairs.pair_table(pairs.format_match, s.frame.spec.fp8, s.base.device)  # cached
    return (pairs.lookup(table, s.base[r, cols], s.cand[r, cols]) & s.differs[r, cols],)


def _cast_columns(s: _Sample, r: torch.Tensor, cols, k_sampled: torch.Tensor | None):
    """(matched, negatives wrapped, negatives to 0) of integer casts of x/s at the sampled columns of rows r."""
    frame, units = s.frame, s.units[r]
    if k_sampled is not None and cols == slice(None):  # all columns of many rows: k's sampled columns, gathered once
        x = k_sampled[frame.source[units].clamp(min=0) * frame.spec.groups_per_token + frame.group[units]]
    else:
        x = frame.x(units.view(-1, 1), s.columns[cols].view(1, -1))
    y = x / frame.quotient_scale(units).view(-1, 1)
    cand = s.cand[r, cols]
    matched, wrapped = pairs.cast_match_fp32(y, s.base[r, cols], cand)
    matched &= s.differs[r, cols]
    negative = matched & (y <= -1)  # trunc(y) < 0, without the trunc
    return matched, (negative & wrapped).sum(dim=1), (negative & (cand == 0)).sum(dim=1)


def _judge_integer_cast(s: _Sample, rows: torch.Tensor, screen: bool) -> tuple[torch.Tensor, dict]:
    """Units whose bytes are x/s converted to an integer (docs/NUMERICS.md)."""
    many = not screen and rows.numel() > PROBE_UNITS  # most of them fit: gather k's sampled columns once
    k_sampled = s.frame.k.view(-1, s.frame.spec.quant_block_size)[:, s.columns].float() if many else None
    return _by_share(s, rows, screen, _cast_columns, ("negative_wrap", "negative_zero"), k_sampled)


# the values a writer computes instead of x / s: the scale multiplied, not divided; no division at all; every
# value clamped to one bound (the clamp's min and max exchanged)
QUOTIENTS = ("x * s", "x", "-max", "+max")


def _quotient_columns(s: _Sample, r: torch.Tensor, cols, aux):
    """(matched, one count per QUOTIENTS entry) of the sampled bytes that are another quotient's FP8 code."""
    frame, units = s.frame, s.units[r]
    x = frame.x(units.view(-1, 1), s.columns[cols].view(1, -1))
    bound = torch.full_like(x, frame.spec.fp8.max)
    quotients = torch.stack([x * frame.quotient_scale(units).view(-1, 1), x, -bound, bound])  # in QUOTIENTS' order
    hit = (fp8.encode(quotients, frame.spec.fp8) == s.cand[r, cols]) & s.differs[r, cols]
    return (hit.any(dim=0), *hit.sum(dim=2))


JUDGES = {Category.UNWRITTEN: _judge_unwritten, Category.FP8_FORMAT: partial(_by_share, match=_format_columns),
          Category.INTEGER_CAST: _judge_integer_cast,
          Category.QUOTIENT: partial(_by_share, match=_quotient_columns, names=QUOTIENTS)}  # ties keep this order


# ---- the stage -------------------------------------------------------------------------------------------


def dense_units(frame: Frame, open_u: torch.Tensor,
                layout_settled: torch.Tensor) -> tuple[list[Claim], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Judge open units with many differing bytes from their sample, cause by cause, the cause that fits most
    of a small probe first. Returns (claims, units taken, units no systemic cause fits that byte-local causes
    may explain: to be split byte by byte, garbage units whose moved bytes are to be found byte by byte)."""
    # unmapped units of blocks whose layout is settled: plain stray writes
    stray = open_u & ~frame.mapped & layout_settled[frame.block_i]
    claims = [unit_claim(frame, Category.STRAY_WRITE, stray)]
    # mapped, so no stray unit; a unit with fewer differing bytes than DENSE_SAMPLED has fewer sampled ones
    candidates = torch.nonzero(open_u & frame.mapped & (frame.n_u >= DENSE_SAMPLED)).view(-1)
    if (s := _sample(frame, candidates, open_u.numel())) is None:
        return claims, stray, torch.zeros_like(open_u), torch.zeros_like(open_u)
    n = s.units.numel()
    probe = torch.arange(0, n, max(1, n // PROBE_UNITS), device=s.units.device)
    likely = {category: judge(s, probe, False)[0].numel() for category, judge in JUDGES.items()}
    left = torch.ones(n, dtype=torch.bool, device=s.units.device)
    for category in sorted(JUDGES, key=lambda c: -likely[c]):  # stable: ties keep the documented order
        # screen where the probe says most rows will not fit: it costs a pass over the first columns
        rows = torch.nonzero(left).view(-1)
        chosen, facts = JUDGES[category](s, rows, 2 * likely[category] < probe.numel())
        claims += [unit_claim(frame, category, frame.units_mask(s.units[chosen])), note(category, **facts)]
        left[chosen] = False
    split, garbage = _byte_local_split(s, torch.nonzero(left).view(-1))
    garbage = frame.units_mask(garbage)
    if frame.moves[0] is None:  # else their moved bytes are found byte by byte (bytewise)
        claims.append(unit_claim(frame, Category.UNKNOWN, garbage))
        garbage = torch.zeros_like(garbage)
    return claims, stray | frame.units_mask(s.units), frame.units_mask(split), garbage


def _byte_local_split(s: _Sample, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(units to split byte by byte, garbage units) of the rows no systemic cause fits: split only where
    byte-local causes explain at least half of the sampled bytes; otherwise the unit is garbage, and a byte of
    it one code from the baseline by chance is no rounding."""
    frame = s.frame
    u = s.units[rows]
    poison = frame.value_poison(u.view(-1, 1), s.columns)
    base, cand = s.base[rows], s.cand[rows]
    pair = pairs.lookup(pairs.pair_table(pairs.byte_local, frame.spec.fp8, s.base.device), base, cand)
    fits = (pair == 1) | ((pair == 2) & (frame.wdiff_u[u].view(-1, 1) == 0)) | (cand == poison) | (base == poison)
    split = 2 * count_true(fits & s.differs[rows]) >= s.sampled[rows]
    return u[split], u[~split]
