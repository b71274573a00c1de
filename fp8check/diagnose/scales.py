"""Stage 2: the scale words of mapped slots; a group's values take its scale's cause."""

from __future__ import annotations

import torch

from ..core.fp8 import code_distance, decode_scales, encode
from ..core.spec import SCALE_FLOOR, FP8Format, ScaleFormat
from .amax import group_amax, implied_divisor, pow2_ceil, wrong_amax
from .claims import Claim, note, unit_claim
from .frame import Frame
from .model import Category

# DIVs seen in real writers (docs/NUMERICS.md): both formats' max, vLLM's e4m3fnuz divisor, e5m2's max.
E5M2_MAX = 57344.0
KNOWN_DIVISORS = tuple(sorted({*(f.max for f in FP8Format), *(f.vllm_divisor for f in FP8Format), E5M2_MAX},
                              reverse=True))
ULP_LIMIT = 16  # fp32 scales this many units in the last place apart or less: scale-ulp
BOUNDARY_TOLERANCE = 2.0**-20  # |amax / (DIV * s) - 1| below this: amax / DIV sits on s
RATIO_RESOLUTION = 2.0**-12  # log2 ratios this close are one ratio
MIN_CLUSTER = 4  # words a constant ratio needs: one group's scale against another's is no divisor (a stray row)


def _on_boundary(frame: Frame, units: torch.Tensor) -> torch.Tensor:
    """bool: amax / DIV of each unit sits on the smaller of its two scales for some known DIV."""
    amax = group_amax(frame, units).clamp(min=SCALE_FLOOR).double()
    low = torch.minimum(frame.base_w[units], frame.cand_w[units]).double()
    divisors = torch.tensor(KNOWN_DIVISORS, dtype=torch.float64, device=units.device).view(-1, 1)
    return ((amax / (divisors * low) - 1).abs() <= BOUNDARY_TOLERANCE).any(dim=0)


def _cluster(log_ratio: torch.Tensor, ratio_units: torch.Tensor, plain: torch.Tensor) -> torch.Tensor:
    """bool: the words at the most common ratio among `plain`, if that is the ratio of most of them
    (random scale words share a ratio only by chance) and of at least MIN_CLUSTER words; none otherwise."""
    if not bool(plain.any()):
        return torch.zeros_like(ratio_units)
    keys = torch.round(log_ratio[plain] / RATIO_RESOLUTION).long()
    # the smallest of the most common keys, counted in bins (no sort): |log2 ratio| of two positive finite
    # fp32 numbers is below 278, so there are at most ~2.3M bins
    low = keys.min()
    mode = float(low + torch.argmax(torch.bincount(keys - low))) * RATIO_RESOLUTION
    in_cluster = ratio_units & ((log_ratio - mode).abs() <= 2 * RATIO_RESOLUTION)
    if 2 * int(in_cluster.sum()) >= int(plain.sum()) and int(in_cluster.sum()) >= MIN_CLUSTER:
        return in_cluster
    return torch.zeros_like(ratio_units)


def _classify(frame: Frame, units: torch.Tensor) -> tuple[list[tuple[Category, torch.Tensor]], list[Claim]]:
    """For the differing scale words of mapped `units` (int64 [n]): ([(scale cause, bool [n]: the words it
    explains)], the notes: the causes' counts and findings)."""
    spec = frame.spec
    base_w, cand_w = frame.base_w[units], frame.cand_w[units]
    poison = frame.scale_poison(units)
    cand_unwritten = (frame.cand_wb[units] == poison).all(dim=1)
    base_unwritten = (frame.base_wb[units] == poison).all(dim=1) & ~cand_unwritten
    unwritten = cand_unwritten | base_unwritten
    # the right scale in the other way of storing it: an fp32 word against four UE8M0 bytes (vLLM's mxfp8)
    other = ScaleFormat.FP32 if spec.scale_fmt is ScaleFormat.UE8M0X4 else ScaleFormat.UE8M0X4
    stored_other = ~unwritten & (decode_scales(frame.cand_wb[units], other).view(-1) == base_w)
    stored_other |= ~unwritten & (decode_scales(frame.base_wb[units], other).view(-1) == cand_w)
    # a writer that ignores ue8m0x4 (it knows ue8m0 and fp32 only) writes the plain fp32 scale, whose
    # power-of-two ceiling is the scale asked for (vLLM 0.33.0's ROCm writer, FlagGems)
    plain_fp32 = torch.zeros_like(stored_other)
    if spec.scale_fmt is ScaleFormat.UE8M0X4:
        as_fp32 = decode_scales(frame.cand_wb[units], ScaleFormat.FP32).view(-1).double()
        usable = ~unwritten & ~stored_other & torch.isfinite(as_fp32) & (as_fp32 > 0) & torch.isfinite(base_w)
        plain_fp32 = usable & (pow2_ceil(torch.where(usable, as_fp32, 1.0)) == base_w.double())
        stored_other |= plain_fp32
    finite = torch.isfinite(base_w) & torch.isfinite(cand_w) & (base_w > 0) & (cand_w > 0) & ~unwritten & ~stored_other
    bits = frame.base_wb[units].contiguous().view(torch.int32).view(-1).long() - \
        frame.cand_wb[units].contiguous().view(torch.int32).view(-1).long()
    ulp = finite & (bits.abs() <= ULP_LIMIT)
    ratio_units = finite & ~ulp
    ratio = cand_w.double() / base_w.double()  # float64: candidate / baseline
    pow2 = torch.zeros_like(ratio_units)
    if spec.scale_fmt.power_of_two:
        doubled = ratio_units & ((ratio == 2.0) | (ratio == 0.5))
        pow2[doubled] = _on_boundary(frame, units[doubled])
    wrong, amax_found = wrong_amax(frame, units, ratio_units & ~pow2)  # the scale of another amax (amax.py)
    ratio_units = ratio_units & ~wrong
    # the word of a neighbouring token, and it has this one's
    swapped = _swapped(frame, units, ratio_units & ~pow2)
    swapped[swapped.clone()] = _values_follow(frame, units[swapped])
    floor, floor_found, floor_bound = _amax_floor(frame, units, ratio_units & ~pow2 & ~swapped)
    rounded_down = torch.zeros_like(ratio_units)  # ue8m0 2^floor(log2 s) instead of 2^ceil
    if spec.scale_fmt.power_of_two:
        # a writer that rounds log2(s) down halves every group whose s is no power of two; a divisor change
        # halves at most log2(240/224) = 10% of them (docs/NUMERICS.md)
        halved = ratio_units & ~pow2 & ~swapped & ~floor & (ratio == 0.5)
        if 2 * int(halved.sum()) >= int(frame.mapped.sum()):
            rounded_down = halved
    plain = ratio_units & ~pow2 & ~swapped & ~floor & ~rounded_down
    in_cluster = _cluster(torch.log2(ratio), ratio_units & ~swapped & ~floor & ~rounded_down, plain)
    pow2 &= ~in_cluster
    # the right amax with the other rounding is a ue8m0 rounding cause; any other amax is `amax`
    amax_category = Category.UE8M0_ROUNDING if amax_found.get("rounding") else Category.AMAX
    kinds = [(Category.UNWRITTEN, unwritten), (Category.SCALE_ULP, ulp), (Category.SCALE_RATIO, in_cluster),
             (Category.SCALE_POW2, pow2), (Category.AMAX_FLOOR, floor), (Category.UE8M0_ROUNDING, rounded_down),
             (Category.SCALE_SWAP, swapped), (Category.SCALE_FORMAT, stored_other), (amax_category, wrong)]
    found = ScaleFormat.FP32 if bool(plain_fp32.any()) else \
        ScaleFormat.UE8M0 if spec.scale_fmt is ScaleFormat.UE8M0X4 else ScaleFormat.UE8M0X4
    notes = [note(Category.UNWRITTEN, baseline_scale_words=base_unwritten.sum(),
                  candidate_scale_words=cand_unwritten.sum()),
             note(amax_category, amax_found, words=wrong.sum(), groups=wrong.sum()),
             note(Category.SCALE_POW2, doubled=(pow2 & (ratio > 1)).sum(), halved=(pow2 & (ratio < 1)).sum()),
             note(Category.AMAX_FLOOR, {"floor_found": floor_found, "floor_bound": floor_bound}, groups=floor.sum()),
             note(Category.UE8M0_ROUNDING, groups=rounded_down.sum()),
             note(Category.SCALE_SWAP, words=swapped.sum()),
             note(Category.SCALE_FORMAT, {"format_found": found.value}, words=stored_other.sum())]
    if bool(in_cluster.any()):  # the constant multiple, and the DIV its words imply
        notes.append(Claim(Category.SCALE_RATIO, found={"ratio": float(torch.median(ratio[in_cluster])),
                                                        "divisor_range": implied_divisor(frame, units[in_cluster])}))
    if bool(ulp.any()):
        notes.append(Claim(Category.SCALE_ULP, found={"max_ulp": int(bits[ulp].abs().max())}))
    return kinds, notes


def _swapped(frame: Frame, units: torch.Tensor, open_w: torch.Tensor) -> torch.Tensor:
    """bool: the candidate's word is the baseline's word of the previous or next token of the block (same
    group), and that token's candidate word is this one's baseline word: two scales stored swapped."""
    v = units + frame.spec.groups_per_token * torch.tensor([[-1], [1]], device=units.device)  # [2, n]
    inside = (v >= 0) & (v < frame.n_u.numel())
    v = v.clamp(0, frame.n_u.numel() - 1)
    same_block = inside & (units // frame.rows == v // frame.rows) & frame.mapped[v]
    cand, base = frame.cand_wb, frame.base_wb
    mutual = ((cand[units] == base[v]).all(dim=-1) & (cand[v] == base[units]).all(dim=-1)
              & (base[units] != base[v]).any(dim=-1))
    return open_w & (same_block & mutual).any(dim=0)


def _values_follow(frame: Frame, units: torch.Tensor) -> torch.Tensor:
    """bool [n]: each unit's value bytes are the baseline's or x / s quantized with its own candidate scale
    (one code apart at most: x / s against x * (1/s)). A scale cause whose values are garbage is no cause
    of those bytes, only a coincidence of the words."""
    cand, fmt = frame.value_rows(frame.cand_phys, units), frame.spec.fp8
    own = encode(frame.x(units) / frame.cand_w[units].view(-1, 1), fmt)
    return ((cand == frame.value_rows(frame.base_phys, units)) | (code_distance(cand, own, fmt) <= 1)).all(dim=1)


def _amax_floor(frame: Frame, units: torch.Tensor, open_w: torch.Tensor) -> tuple[torch.Tensor, float | None, str]:
    """(bool: groups with amax below 1e-4 whose candidate scale is that of a lower floor, the floor found, how it
    bounds the floor: "exact", "range" (in (found / 2, found]) or "at_most"). The candidate's scale tracks
    amax / DIV (DIV one of the format's), or, where amax is below the candidate's floor too, sits below
    1e-4 / DIV."""
    spec = frame.spec
    none = torch.zeros_like(open_w)
    if not bool(open_w.any()):
        return none, None, "exact"
    amax = group_amax(frame, units).double()
    base, cand = frame.base_w[units].double(), frame.cand_w[units].double()
    tiny = open_w & (amax < SCALE_FLOOR) & (cand < base)
    divisors = torch.tensor(sorted({spec.fp8.max, spec.fp8.vllm_divisor}), dtype=torch.float64, device=amax.device)
    exact, implied = amax / divisors.view(-1, 1), cand * divisors.view(-1, 1)  # [DIVs, n]
    wanted = pow2_ceil(exact) if spec.scale_fmt.power_of_two else exact
    near = (cand - wanted).abs() <= ULP_LIMIT * torch.finfo(torch.float32).eps * wanted
    low = tiny & ~near & (implied < SCALE_FLOOR * (1 - 1e-6)) & (implied > amax)
    tracks, below = (tiny & (amax > 0) & near).any(dim=0), low.any(dim=0)
    floor = tracks | below
    if not bool(floor.any()):
        return none, None, "exact"
    if bool(below.any()):
        found = float(implied[low].min())
        if spec.scale_fmt.power_of_two:
            return floor, found, "range"  # F / DIV rounds up to the same power of two: F in (found / 2, found]
        return floor, float(f"{found:.3g}"), "exact"
    return floor, float(amax[tracks].min()), "at_most"  # no group below the candidate's floor: F <= min amax


def scales(frame: Frame, open_u: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """Scale words of mapped units; the value bytes of groups whose scale has a scale cause inherit it (a
    wrong scale moves every value of its group). Returns the claims and the units whose values were taken."""
    differs = frame.mapped & (frame.wdiff_u > 0)
    taken = torch.zeros_like(open_u)
    if not bool(differs.any()):
        return [], taken
    units = torch.nonzero(differs).view(-1)
    kinds, notes = _classify(frame, units)
    claims: list[Claim] = []
    rest = differs.clone()  # scale words no cause explains: their bytes go through the byte-level fallback
    for category, chosen in kinds:
        mask = frame.units_mask(units[chosen])
        rest &= ~mask
        claims.append(unit_claim(frame, category, mask, value=False, scale=True))
        if category is not Category.UNWRITTEN:
            claims.append(unit_claim(frame, category, mask & open_u & ~taken))
            taken |= mask
    return claims + notes + [unit_claim(frame, Category.UNKNOWN, rest, value=False, scale=True)], taken
