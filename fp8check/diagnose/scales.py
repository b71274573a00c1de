"""Stage 2: the scale words of mapped slots. A pure function of the frame and the units still open; it
returns its claims and the units whose value bytes it took (a wrong scale moves every value of its group).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..spec import SCALE_FLOOR, FP8Format, ScaleFormat
from .claims import Claim, note, unit_claim
from .frame import Frame
from .model import Category

# DIVs seen in real writers (SPEC.md section 3): both formats' max, vLLM's e4m3fnuz divisor, e5m2's max.
E5M2_MAX = 57344.0
KNOWN_DIVISORS = tuple(sorted({*(f.max for f in FP8Format), *(f.vllm_divisor for f in FP8Format), E5M2_MAX},
                              reverse=True))
ULP_LIMIT = 16  # fp32 scales this many units in the last place apart or less: scale-ulp
BOUNDARY_TOLERANCE = 2.0**-20  # |amax / (DIV * s) - 1| below this: amax / DIV sits on s
RATIO_RESOLUTION = 2.0**-12  # log2 ratios this close are one ratio


@dataclass(frozen=True)
class _ScaleKinds:
    """Per differing scale word of mapped units (`units`): which scale cause fits."""

    units: torch.Tensor  # int64 [n]
    unwritten: torch.Tensor  # bool [n] each
    base_unwritten: torch.Tensor
    ulp: torch.Tensor
    ratio: torch.Tensor  # float64 [n]: candidate / baseline
    bits: torch.Tensor  # int64 [n]: difference of the words as int32
    in_cluster: torch.Tensor
    pow2: torch.Tensor
    mode_ratio: float | None  # the constant multiple, where one explains most words


def _amax(frame: Frame, units: torch.Tensor) -> torch.Tensor:
    columns = torch.arange(frame.spec.quant_block_size, device=units.device)
    return frame.x(units.view(-1, 1), columns.view(1, -1)).abs().amax(dim=1)


def _on_boundary(frame: Frame, units: torch.Tensor) -> torch.Tensor:
    """bool: amax / DIV of each unit sits on the smaller of its two scales for some known DIV."""
    if not units.numel():
        return torch.zeros(0, dtype=torch.bool, device=units.device)
    amax = _amax(frame, units).clamp(min=SCALE_FLOOR).double()
    low = torch.minimum(frame.base_w[units], frame.cand_w[units]).double()
    near = torch.zeros_like(amax, dtype=torch.bool)
    for divisor in KNOWN_DIVISORS:
        near |= ((amax / (divisor * low)) - 1).abs() <= BOUNDARY_TOLERANCE
    return near


def _cluster(log_ratio: torch.Tensor, ratio_units: torch.Tensor, plain: torch.Tensor) -> torch.Tensor:
    """bool: the words at the most common ratio among `plain`, if that is the ratio of most of them
    (random scale words share a ratio only by chance); none otherwise."""
    if not bool(plain.any()):
        return torch.zeros_like(ratio_units)
    keys = torch.round(log_ratio[plain] / RATIO_RESOLUTION).long()
    # the smallest of the most common keys, counted in bins (no sort): |log2 ratio| of two positive finite
    # fp32 numbers is below 278, so there are at most ~2.3M bins
    low = keys.min()
    mode = float(low + torch.argmax(torch.bincount(keys - low))) * RATIO_RESOLUTION
    in_cluster = ratio_units & ((log_ratio - mode).abs() <= 2 * RATIO_RESOLUTION)
    if 2 * int(in_cluster.sum()) >= int(plain.sum()):
        return in_cluster
    return torch.zeros_like(ratio_units)


def _classify(frame: Frame, units: torch.Tensor) -> _ScaleKinds:
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
    if frame.spec.scale_fmt.power_of_two:
        doubled = ratio_units & ((ratio == 2.0) | (ratio == 0.5))
        pow2[doubled] = _on_boundary(frame, units[doubled])
    in_cluster = _cluster(log_ratio, ratio_units, ratio_units & ~pow2)
    mode_ratio = float(torch.median(ratio[in_cluster])) if bool(in_cluster.any()) else None
    return _ScaleKinds(units, unwritten, base_unwritten, ulp, ratio, bits, in_cluster, pow2 & ~in_cluster,
                       mode_ratio)


def scales(frame: Frame, open_u: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """Scale words of mapped units; the value bytes of groups whose scale has a scale cause inherit it (a
    wrong scale moves every value of its group). Returns the claims and the units whose values were taken."""
    differs = frame.mapped & (frame.wdiff_u > 0)
    taken = torch.zeros_like(open_u)
    if not bool(differs.any()):
        return [], taken
    kinds = _classify(frame, torch.nonzero(differs).view(-1))
    claims: list[Claim] = []
    for category, chosen in ((Category.UNWRITTEN, kinds.unwritten), (Category.SCALE_ULP, kinds.ulp),
                             (Category.SCALE_RATIO, kinds.in_cluster), (Category.SCALE_POW2, kinds.pow2)):
        if not bool(chosen.any()):
            continue
        mask = frame.units_mask(kinds.units[chosen])
        claims.append(unit_claim(frame, category, mask, value=False, scale=True))
        if category is not Category.UNWRITTEN:
            claims.append(unit_claim(frame, category, mask & open_u & ~taken))
            taken |= mask
    claims += _scale_notes(kinds)
    # scale words no cause explains: their bytes go through the byte-level fallback
    rest = differs.clone()
    rest[kinds.units[kinds.unwritten | kinds.ulp | kinds.in_cluster | kinds.pow2]] = False
    if bool(rest.any()):
        claims.append(unit_claim(frame, Category.UNKNOWN, rest, value=False, scale=True))
    return claims, taken


def _scale_notes(kinds: _ScaleKinds) -> list[Claim]:
    claims = [note(Category.UNWRITTEN, baseline_scale_words=int(kinds.base_unwritten.sum()))]
    if kinds.mode_ratio is not None:
        claims.append(Claim(Category.SCALE_RATIO, found={"ratio": kinds.mode_ratio}))
    if bool(kinds.ulp.any()):
        claims.append(Claim(Category.SCALE_ULP, found={"max_ulp": int(kinds.bits[kinds.ulp].abs().max())}))
    claims.append(note(Category.SCALE_POW2, doubled=int((kinds.pow2 & (kinds.ratio > 1)).sum()),
                       halved=int((kinds.pow2 & (kinds.ratio < 1)).sum())))
    return claims
