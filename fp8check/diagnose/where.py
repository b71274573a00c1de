"""Stage 1: where. Guard bytes and bytes of slots no token maps to are stray writes (value bytes of an
unmapped slot in a block some token maps into are first offered to `layout`); rows of real tokens overwritten."""

from __future__ import annotations

import torch

from ..core.cache import CacheBuffer, poison_at
from ..core.fp8 import encode_scales
from ..core.reference import AITER, quantize
from .amax import scale_of
from .claims import Claim, note, unit_claim
from .frame import Frame
from .model import EXAMPLES, Category


def guards(baseline: CacheBuffer, candidate: CacheBuffer, cache_bytes: int) -> list[Claim]:
    """Guard bytes that differ: stray writes outside the cache."""
    a, b = baseline.guards, candidate.guards  # [front guard | back guard]
    differs = a != b
    count = int(differs.sum())
    guard = baseline.guard_bytes
    offset = torch.arange(2 * guard, device=a.device) - guard  # Example.guard_offset
    position = torch.where(offset < 0, offset, offset + cache_bytes) + guard  # in the whole buffer
    examples = tuple(("guard", int(o)) for o in offset[differs][:EXAMPLES].tolist())
    counts = {"guard": count, "candidate_guard": int((differs & (b != poison_at(position))).sum())}
    return [Claim(Category.STRAY_WRITE, count, examples, counts)]


def unmapped(frame: Frame, open_u: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """Scale words of unmapped slots, and whole units of blocks no token maps into: stray writes."""
    free = ~frame.mapped
    empty_block = free & ~frame.block_mapped[frame.block_i]
    return [unit_claim(frame, Category.STRAY_WRITE, free, value=False, scale=True),
            unit_claim(frame, Category.STRAY_WRITE, empty_block & open_u)], empty_block


def non_finite(frame: Frame) -> tuple[list[Claim], torch.Tensor]:
    """Quant groups whose input holds NaN or inf: the writers share no convention there, so all their differing
    bytes (values and scale) are `non-finite-input`. Returns the claims and the units taken."""
    spec = frame.spec
    groups = frame.k.view(-1, spec.quant_block_size)
    if groups.dtype == torch.bfloat16:  # all-ones exponent: inf or NaN, read from the bits (bf16 math is slow)
        special = ((groups.view(torch.int16) & 0x7F80) == 0x7F80).any(dim=-1)
    else:
        special = ~torch.isfinite(groups).all(dim=-1)
    unit_row = frame.source.clamp(min=0) * spec.groups_per_token + frame.group
    hit = frame.mapped & special[unit_row] & ((frame.n_u > 0) | (frame.wdiff_u > 0))
    rows = groups[unit_row[hit]].float()
    nan, inf = torch.isnan(rows).any(dim=-1), torch.isinf(rows).any(dim=-1)
    return [unit_claim(frame, Category.NON_FINITE, hit, value=True, scale=True),
            note(Category.NON_FINITE, groups=hit.sum(), nan_groups=nan.sum(),
                 inf_groups=(inf & ~nan).sum())], hit


def _zero_word(frame: Frame, words: torch.Tensor) -> torch.Tensor:
    """bool [...]: the words [..., 4] hold the scale of amax 0, max(0, 1e-4) / DIV for a DIV of the format."""
    spec, zero = frame.spec, torch.zeros(1, dtype=torch.float32, device=words.device)
    divisors = {spec.fp8.max, spec.fp8.vllm_divisor}
    scales = [scale_of(zero, d, True, spec.scale_fmt.power_of_two) for d in divisors]
    return (words.unsqueeze(-2) == encode_scales(torch.cat(scales), spec.scale_fmt)).all(dim=-1).any(dim=-1)


def zero_input(frame: Frame) -> tuple[list[Claim], torch.Tensor]:
    """Quant groups written as the quantization of an all-zero input (every code 0, the scale max(0, 1e-4) / DIV
    of one of the format's DIVs) where k is not zero: the load of k returned zeros (masked off, or misplaced)."""
    units = torch.nonzero(frame.mapped & (frame.n_u > 0)).view(-1)
    hit = (frame.value_rows(frame.cand_phys, units) == 0).all(dim=1) & _zero_word(frame, frame.cand_wb[units])
    taken = frame.units_mask(units[hit])
    return [unit_claim(frame, Category.ZERO_INPUT, taken, value=True, scale=True),
            note(Category.ZERO_INPUT, groups=hit.sum())], taken


OVERWRITE_UNITS = 4096  # units tried against the padding rows: more is a systematic fault, not a stray row
OVERWRITE_SHARE = 0.9  # value bytes of a unit that must be a padding row's for it to count as overwritten


def overwritten(frame: Frame) -> tuple[list[Claim], torch.Tensor]:
    """Units of real tokens whose scale word and value bytes are padding rows' (tokens with slot < 0) quantized
    by the reference: padding written over a real token. Stray writes, not scale causes."""
    spec = frame.spec
    units = torch.nonzero(frame.mapped & (frame.wdiff_u > 0)).view(-1)
    if not frame.padding.numel() or not units.numel() or units.numel() > OVERWRITE_UNITS:
        return [], torch.zeros_like(frame.mapped)
    codes, scales = quantize(frame.k.index_select(0, frame.padding[:OVERWRITE_UNITS]), profile=AITER,
                             fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=spec.quant_block_size)
    words = encode_scales(scales, spec.scale_fmt)  # [P, groups, 4]
    codes = codes.view(codes.shape[0], spec.groups_per_token, spec.quant_block_size)
    group = frame.group[units]
    same_word = (frame.cand_wb[units].unsqueeze(1) == words[:, group].transpose(0, 1)).all(dim=-1)  # [n, P]
    values = frame.value_rows(frame.cand_phys, units)  # [n, qbs]
    agree = (values.unsqueeze(1) == codes[:, group].transpose(0, 1)).sum(dim=-1)  # [n, P]
    # several padding rows on one slot race: the values of one of them may sit under another one's scale
    hit = same_word.any(dim=1) & (agree >= OVERWRITE_SHARE * spec.quant_block_size).any(dim=1)
    taken = frame.units_mask(units[hit])
    claim = unit_claim(frame, Category.STRAY_WRITE, taken, value=True, scale=True)
    slots = torch.unique(frame.blocks[frame.block_i[units[hit]]] * spec.block_size + frame.token[units[hit]])
    return [claim, note(Category.STRAY_WRITE, overwritten=claim.bytes, overwritten_slots=slots.numel())], taken


FOREIGN_SLOTS = 2  # real tokens' slots a row of no token may overwrite: more is a systematic fault
FOREIGN_SHARE = 0.75  # value bytes of such a unit that must differ (a whole row, not a few codes)


def foreign_rows(frame: Frame) -> tuple[list[Claim], torch.Tensor]:
    """Real tokens' slots holding a row of no token, where nothing else in the cache differs: whole rows
    (values and scale), or bytes a lane with no token writes (codes 0 of its masked input, words of the scale
    of amax 0) where a `<=` in the token mask, a grid too large or a store without its mask sends it."""
    spec, qbs = frame.spec, frame.spec.quant_block_size
    none = torch.zeros_like(frame.mapped)
    differs = (frame.n_u > 0) | (frame.wdiff_u > 0)
    whole = frame.mapped & (frame.wdiff_u > 0) & (frame.n_u >= FOREIGN_SHARE * qbs)
    units = torch.nonzero(differs).view(-1)
    slots = torch.unique(frame.blocks[frame.block_i[units]] * spec.block_size + frame.token[units])
    if not units.numel() or slots.numel() > FOREIGN_SLOTS or not bool(frame.mapped[units].all()):
        return [], none
    cand = frame.value_rows(frame.cand_phys, units)
    byte = frame.value_index[frame.token[units].view(-1, 1), frame.group[units].view(-1, 1) * qbs
                             + torch.arange(qbs, device=units.device)]  # [n, qbs]: the bytes in the block
    word = frame.cand_phys[frame.block_i[units]].gather(1, (byte - byte % 4).repeat_interleave(4, dim=1)
                                                         + torch.arange(4, device=units.device).repeat(qbs))
    base = frame.value_rows(frame.base_phys, units)
    lane = ((cand == 0) | (cand == base) | _zero_word(frame, word.view(-1, qbs, 4))).all(dim=1)
    lane &= (frame.wdiff_u[units] == 0) | _zero_word(frame, frame.cand_wb[units])
    if not (torch.equal(whole, differs) or bool(lane.all())):
        return [], none
    claim = unit_claim(frame, Category.STRAY_WRITE, differs, value=True, scale=True)
    # another real token's row (values and scale word) copied there, or a row of no token at all
    others = torch.nonzero(frame.mapped).view(-1)
    rows = torch.cat([frame.value_rows(frame.base_phys, others), frame.base_wb[others]], dim=1)
    mine = torch.cat([cand, frame.cand_wb[units]], dim=1)
    key = "copied" if bool((mine.unsqueeze(1) == rows).all(dim=2).any(dim=1).all()) else "foreign"
    return [claim, note(Category.STRAY_WRITE, **{key: claim.bytes, f"{key}_slots": slots.numel()})], differs
