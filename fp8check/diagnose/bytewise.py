"""Stage 4: byte by byte. Sparse units get the systemic causes per byte, each gated per unit (layout: per
block) so chance coincidences (1 in 256) never add up to a cause; then every leftover byte gets the
byte-local causes: signed-zero, saturation-nan, rounding, poison (unwritten), unknown."""

from __future__ import annotations

import torch

from ..core import fp8, pairs
from .claims import Bytes, Claim
from .frame import Frame, other_layout
from .model import Category
from .systemic import other_predicted, other_tables

MIN_MATCHES = 4  # matching bytes a systemic cause needs in a unit judged byte by byte (1 once seen dense)
CHUNK_BYTES = 1 << 22  # dense byte-local work per step


def _gate(keys: torch.Tensor, match: torch.Tensor, left: torch.Tensor, size: int, minimum: int) -> torch.Tensor:
    """bool per byte: its key (unit or block) has >= minimum matching bytes and they are half its bytes left."""
    matches = torch.zeros(size, dtype=torch.int64, device=keys.device).index_add_(0, keys, (match & left).long())
    total = torch.zeros_like(matches).index_add_(0, keys, left.long())
    return ((matches >= minimum) & (2 * matches >= total))[keys] & match & left


def _layout_bytes(frame: Frame, b: Bytes, left: torch.Tensor, layout_settled: torch.Tensor,
                  minimum: int) -> tuple[list[Claim], torch.Tensor]:
    """Bytes of blocks whose layout the sample left open that the other layout explains."""
    spec = frame.spec
    other = other_layout(spec)
    block_i = frame.block_i[b.unit]
    open_blocks = ~layout_settled[block_i] & frame.block_mapped[block_i]
    if other is None or not bool(open_blocks.any()):
        return [], left
    byte = frame.value_index[frame.token[b.unit], frame.group[b.unit] * spec.quant_block_size + b.column]
    predicted = other_predicted(frame, other_tables(spec, other, byte.device), block_i, byte)
    chosen = _gate(block_i, open_blocks & (b.cand == predicted), left, frame.blocks.numel(), minimum)
    claims, left = b.claim(frame, Category.LAYOUT, chosen, left)
    return claims + [Claim(Category.LAYOUT, found={"layout_found": other.value})] * bool(claims), left


def _poisoned_units(frame: Frame, b: Bytes, left: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """Units whose every value byte still holds the poison fill: unwritten."""
    poison = left & (b.cand == frame.value_poison(b.unit, b.column))
    whole = frame.units_mask(b.unit[poison])
    whole[b.unit[left & ~poison]] = False
    index = torch.nonzero(whole).view(-1)
    whole[index] = (frame.value_rows(frame.cand_phys, index) == frame.value_poison(index)).all(dim=1)
    return b.claim(frame, Category.UNWRITTEN, whole[b.unit], left, units=whole.sum())


def _integer_cast_bytes(frame: Frame, b: Bytes, left: torch.Tensor, mapped: torch.Tensor,
                        minimum: int) -> tuple[list[Claim], torch.Tensor]:
    y = frame.x(b.unit, b.column) / frame.quotient_scale(b.unit)
    cast, wrapped = pairs.cast_match(y, b.base, b.cand)
    chosen = _gate(b.unit, cast & mapped, left, frame.n_u.numel(), minimum)
    negative = chosen & (y <= -1)  # trunc(y) < 0, without the trunc
    return b.claim(frame, Category.INTEGER_CAST, chosen, left, negative_wrap=(wrapped & negative).sum(),
                   negative_zero=(negative & (b.cand == 0)).sum())


def byte_by_byte(frame: Frame, units: torch.Tensor, layout_settled: torch.Tensor,
                 active: frozenset) -> list[Claim]:
    """Sparse units (bool [U]): the systemic causes byte by byte, then the byte-local causes. active: the
    systemic causes already found in dense units, which need one matching byte instead of MIN_MATCHES."""
    if not bool(units.any()):
        return []
    b = Bytes.listed(frame, units)
    mapped = frame.source[b.unit] >= 0
    minimum = {c: 1 if c in active else MIN_MATCHES
               for c in (Category.LAYOUT, Category.FP8_FORMAT, Category.INTEGER_CAST)}
    claims, left = _layout_bytes(frame, b, b.differs, layout_settled, minimum[Category.LAYOUT])
    more, left = b.claim(frame, Category.STRAY_WRITE, ~mapped, left)
    claims += more
    more, left = _poisoned_units(frame, b, left)
    claims += more
    match = pairs.format_match(frame.spec.fp8, b.base, b.cand) & mapped
    chosen = _gate(b.unit, match, left, frame.n_u.numel(), minimum[Category.FP8_FORMAT])
    more, left = b.claim(frame, Category.FP8_FORMAT, chosen, left)
    claims += more
    more, left = _integer_cast_bytes(frame, b, left, mapped, minimum[Category.INTEGER_CAST])
    return claims + more + byte_local(frame, b, left)


def dense_byte_local(frame: Frame, units: torch.Tensor, local: bool = True) -> list[Claim]:
    """Dense units that no systemic cause fits but byte-local causes may (not local: only moved bytes, garbage
    units): byte by byte, in chunks of units, so a cache full of them never becomes a list of 100M bytes."""
    index = torch.nonzero(units).view(-1)
    chunk = max(1, CHUNK_BYTES // frame.spec.quant_block_size)
    chunks = (Bytes.chunk(frame, index[start : start + chunk]) for start in range(0, index.numel(), chunk))
    return [claim for b in chunks for claim in byte_local(frame, b, b.differs, local)]


# ---- the byte-local causes ----------------------------------------------------------------------------------


def _saturation(frame: Frame, b: Bytes, left: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """+-max against NaN, and clipped against unclipped (|x/s| > max, the other side a finite code)."""
    fmt = frame.spec.fp8
    base_max, cand_max, base_nan, cand_nan = pairs.extreme(b.base, b.cand, fmt)
    nan_vs_max = ((base_nan & cand_max) | (cand_nan & base_max)) & left
    claims, left = b.claim(frame, Category.SATURATION_NAN, nan_vs_max, left,
                           candidate_nan=torch.count_nonzero(nan_vs_max & cand_nan),
                           baseline_nan=torch.count_nonzero(nan_vs_max & base_nan))
    maybe = left & (base_max ^ cand_max) & ~base_nan & ~cand_nan & (((b.base ^ b.cand) & 0x80) == 0)
    maybe &= (frame.wdiff_u[b.unit] == 0) & (frame.source[b.unit] >= 0)
    unit, column, index = b.entries(maybe)
    clipped = torch.zeros_like(maybe)
    clipped.view(-1)[index] = (frame.x(unit, column) / frame.base_w[unit]).abs() > fmt.max
    more, left = b.claim(frame, Category.SATURATION_NAN, clipped, left)
    return claims + more, left


def _rounding(frame: Frame, b: Bytes, left: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """Codes one apart under equal scales; counts the exact ties and which side rounded them to even."""
    fmt = frame.spec.fp8
    rounding = pairs.one_code_apart(b.base, b.cand, fmt) & (frame.wdiff_u[b.unit] == 0) & left
    unit, column, index = b.entries(rounding)
    # a tie of the rounding mode: the exact x/s (bf16 x and fp32 s are exact in fp64) is a midpoint and both
    # fp32 quotients (x / s and x * (1/s)) hit it, so no writer's quotient moved it off the tie
    x, s = frame.x(unit, column), frame.base_w[unit]
    y = x.double() / s.double()
    pair_base, pair_cand = b.base.reshape(-1)[index], b.cand.reshape(-1)[index]
    tie = (2 * y == fp8.decode(pair_base, fmt).double() + fp8.decode(pair_cand, fmt).double())
    tie &= ((x / s).double() == y) & ((x * (1 / s)).double() == y) & (frame.source[unit] >= 0)
    return b.claim(frame, Category.ROUNDING, rounding, left, ties=tie.sum(),
                   ties_candidate_even=(tie & (pair_cand % 2 == 0)).sum(),
                   ties_baseline_even=(tie & (pair_base % 2 == 0)).sum())


def _poison_bytes(frame: Frame, b: Bytes, left: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """Bytes still holding the poison fill on either side: unwritten, where the poison is a pattern (MIN_MATCHES
    of them and half the open bytes of their unit, or of their column across units: a skipped column); a
    written value that equals the poison fill of its place by chance (1 in 256) is no unwritten byte."""
    poison = frame.value_poison(b.unit, b.column)
    base_poison = (b.base == poison) & left
    left_poison = ((b.cand == poison) & left) | base_poison
    if not bool(left_poison.any()):
        return [], left
    unit = b.unit.expand_as(b.base).reshape(-1)
    column = (frame.group[unit] * frame.spec.quant_block_size + b.column.expand_as(b.base).reshape(-1))
    flat_poison, flat_left = left_poison.reshape(-1), left.reshape(-1)
    pattern = _gate(unit, flat_poison, flat_left, frame.n_u.numel(), MIN_MATCHES)
    pattern |= _gate(column, flat_poison, flat_left, frame.spec.head_dim, MIN_MATCHES)
    pattern = pattern.view_as(left)
    return b.claim(frame, Category.UNWRITTEN, pattern, left,
                   baseline_bytes=torch.count_nonzero(base_poison & pattern))


def _moved(frame: Frame, b: Bytes, left: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """Bytes holding the baseline's byte (of a mapped slot) at the place moved.byte_moves names."""
    moves, found = frame.moves
    if moves is None or not bool(left.any()):
        return [], left
    spec, v, nd = frame.spec, frame.spec.value_extent, frame.blocks.numel()
    unit, column, index = b.entries(left)
    source = moves[frame.value_index[frame.token[unit], frame.group[unit] * spec.quant_block_size + column]]
    block = frame.blocks[frame.block_i[unit]] + source.clamp(min=0) // v - 1  # the source's cache block
    j, q = torch.searchsorted(frame.blocks, block).clamp(max=nd - 1), source.clamp(min=0) % v  # blocks ascend
    owner = other_tables(spec, spec.layout, left.device)[0]  # the token of each byte of a block
    fits = (source >= 0) & (frame.blocks[j] == block) & (frame.base_phys[j, q] == b.cand.reshape(-1)[index])
    fits &= frame.source[(j * spec.block_size + owner[q]) * spec.groups_per_token] >= 0  # a mapped slot's
    mask = torch.zeros_like(left)
    mask.view(-1)[index] = fits
    claims, left = b.claim(frame, Category.PERMUTATION, mask, left)
    return claims + [Claim(Category.PERMUTATION, found=found)] * bool(claims), left


def byte_local(frame: Frame, b: Bytes, left: torch.Tensor, local: bool = True) -> list[Claim]:
    """moved bytes, signed-zero, saturation-nan, rounding, poison (these four only where local), unknown: each
    byte of `left` on its own."""
    claims, left = _moved(frame, b, left)
    zero = pairs.zero_pair(b.base, b.cand) & left & local
    more, left = b.claim(frame, Category.SIGNED_ZERO, zero, left,
                         candidate_negative=torch.count_nonzero(zero & (b.cand == 0x80)),
                         baseline_negative=torch.count_nonzero(zero & (b.base == 0x80)))
    claims += more
    for stage in (_saturation, _rounding, _poison_bytes) if local else ():
        more, left = stage(frame, b, left)
        claims += more
    more, _ = b.claim(frame, Category.UNKNOWN, left, left)
    return claims + more
