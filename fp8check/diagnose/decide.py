"""Decide: the typed facts of each cause and of each example, as JSON-safe dicts (NaN/inf become strings only
in JSON); words.py turns them into sentences."""

from __future__ import annotations

import math
from collections import Counter

import torch

from ..core import fp8, pairs
from ..core.cache import CacheBuffer
from ..core.diff import Mismatch, mismatch_at
from ..core.spec import SCALE_FLOOR, CacheSpec, Layout, Region
from .frame import Frame, other_layout
from .model import Category, Example
from .scales import KNOWN_DIVISORS
from .systemic import QUOTIENTS


def divisor_pair(ratio: float, spec: CacheSpec, divisor_range=None) -> list[float] | None:
    """The (baseline DIV, candidate DIV) behind a constant scale ratio candidate/baseline: s = amax / DIV, so the
    ratio is baseline DIV / candidate DIV (ue8m0: up to the power-of-two rounding, which can turn any ratio
    below 2 into 2). The spec format's own divisors first (on e4m3fnuz: 240, its max, against vLLM's 224), any
    known divisor only where those cannot explain it. divisor_range: the candidate DIV the written scales allow
    (amax.implied_divisor); a pair is named only when its candidate DIV is the one known divisor in that range
    (the bytes single it out)."""
    if not (math.isfinite(ratio) and ratio > 0):
        return None
    inside = KNOWN_DIVISORS
    if divisor_range is not None:
        low, high = divisor_range
        inside = [d for d in KNOWN_DIVISORS if low * (1 - 1e-6) <= d <= high * (1 + 1e-6)]
        if len(inside) != 1:
            return None
    for pool in (sorted({spec.fp8.max, spec.fp8.vllm_divisor}, reverse=True), KNOWN_DIVISORS):
        closest = min(((abs(math.log2(a / b) - math.log2(ratio)), a, b) for a in pool for b in pool
                       if a != b and b in inside), default=None)
        if closest and closest[0] < (1 if spec.scale_fmt.power_of_two else 1e-4):
            return [closest[1], closest[2]]
    return None


def cause_facts(spec: CacheSpec, category: Category, count: int, c: Counter, found: dict) -> dict:
    """The typed facts of one cause, from its summed counts (c, 0 where none was counted) and merged findings."""
    if category is Category.UNWRITTEN:
        return {"tokens_never_written": c["units"] // spec.groups_per_token,
                "baseline_poison_bytes": c["baseline_bytes"], "baseline_poison_scales": c["baseline_scale_words"],
                "value_groups_unwritten": c["units"], "scale_words_unwritten": c["candidate_scale_words"]}
    if category is Category.STRAY_WRITE:
        slot_bytes = count - c["guard"] - c["overwritten"] - c["foreign"] - c["copied"]
        facts = {"guard_bytes": c["guard"], "slot_bytes": slot_bytes, "candidate_guard_bytes": c["candidate_guard"],
                 "overwritten_bytes": c["overwritten"], "overwritten_slots": c["overwritten_slots"]}
        for key in ("foreign", "copied"):
            if c[key]:
                facts |= {f"{key}_bytes": c[key], f"{key}_slots": c[f"{key}_slots"]}
        return facts
    if category is Category.INTEGER_CAST:
        wrap, zero = c["negative_wrap"], c["negative_zero"]
        convention = "nvidia" if zero > wrap else "wrap" if wrap else "trunc"
        return {"convention": convention, "negative_wrapped": wrap, "negative_to_zero": zero}
    if category is Category.LAYOUT:
        return {"layout_found": found.get("layout_found"), "layout_expected": spec.layout.value}
    if category is Category.FP8_FORMAT:
        return {"format_found": pairs.other_format(spec.fp8).value, "format_expected": spec.fp8.value}
    if category is Category.SCALE_RATIO:
        ratio, implied = found.get("ratio", math.nan), found.get("divisor_range")
        return {"ratio": ratio, "divisors": divisor_pair(ratio, spec, implied),
                "divisor_range": list(implied) if implied else None}
    if category is Category.SCALE_ULP:
        return {"max_ulp": found.get("max_ulp")}
    if category is Category.AMAX_FLOOR:
        return {"groups": c["groups"], "floor_found": found.get("floor_found"),
                "floor_bound": found.get("floor_bound"), "floor_expected": SCALE_FLOOR}
    if category is Category.UE8M0_ROUNDING:
        expected = "ceil" if spec.scale_fmt.power_of_two else "none"
        return {"groups": c["groups"], "direction": found.get("rounding", "floor"), "expected": expected}
    if category is Category.SHIFT:
        return {"moved": found.get("moved"), "by": found.get("by"), "offset": found.get("offset"),
                "units_moved_in": c["units"]}
    if category is Category.PERMUTATION:
        return dict(found)
    if category is Category.QUOTIENT:
        return {"computed": max(QUOTIENTS, key=lambda name: c[name]), **{name: c[name] for name in QUOTIENTS}}
    if category is Category.AMAX:
        return {"amax": found.get("amax"), "divisor": found.get("divisor"), "words": c["words"]}
    if category is Category.SCALE_FORMAT:
        return {"words": c["words"], "format_found": found.get("format_found"), "format_expected": spec.scale_fmt.value}
    if category is Category.ROUNDING:
        ties, base_even, cand_even = c["ties"], c["ties_baseline_even"], c["ties_candidate_even"]
        even = ("baseline" if base_even >= cand_even else "candidate") if ties and ties >= 0.9 * count else None
        return {"ties": ties, "ties_to_even": even, "ties_baseline_even": base_even, "ties_candidate_even": cand_even}
    if category in SIDES:
        key, (a, b), (side_a, side_b) = SIDES[category]
        return {key: side_a if c[a] >= c[b] else side_b, a: c[a], b: c[b]}
    return {key: c[key] for key in COUNTED.get(category, ())}


SIDES = {  # causes that name the side with more of two counts: (its fact, the counts, the sides)
    Category.SCALE_POW2: ("direction", ("doubled", "halved"), ("doubled", "halved")),
    Category.SATURATION_NAN: ("nan_side", ("candidate_nan", "baseline_nan"), ("candidate", "baseline")),
    Category.SIGNED_ZERO: ("negative_side", ("candidate_negative", "baseline_negative"), ("candidate", "baseline"))}
COUNTED = {Category.SCALE_SWAP: ("words",), Category.ZERO_INPUT: ("groups",),  # facts that are counts alone
           Category.NON_FINITE: ("groups", "nan_groups", "inf_groups")}


# ---- examples ------------------------------------------------------------------------------------------


def example(spec: CacheSpec, category: Category, locus: tuple[str, int], frame: Frame | None,
            baseline: CacheBuffer, candidate: CacheBuffer, found: dict) -> Example:
    """The record of one example byte (a flat cache index, or a guard offset) and what fits there."""
    kind, index = locus
    if kind == "guard":
        position = baseline.guard_bytes + index  # guards = [front | back]; offsets -guard..-1, then 0..guard-1
        return Example(None, index, int(baseline.guards[position]), int(candidate.guards[position]), None, None)
    m = mismatch_at(spec, baseline.flat, candidate.flat, index)
    facts = _example_facts(spec, category, m, frame, found)  # a cache byte differs: there is a frame
    return Example(m.coordinate, None, m.baseline_byte, m.candidate_byte, m.baseline_value, m.candidate_value, facts)


SCALE_CAUSES = (Category.SCALE_RATIO, Category.SCALE_POW2, Category.SCALE_ULP, Category.AMAX_FLOOR,
                Category.UE8M0_ROUNDING, Category.SCALE_SWAP, Category.SCALE_FORMAT, Category.AMAX)


def _word_hex(word: torch.Tensor) -> str:
    """A 4-byte scale word as the little-endian 32-bit number it is (0x3b9492f2), whatever its format."""
    return f"0x{int.from_bytes(bytes(word.tolist()), 'little'):08x}"


def _example_facts(spec: CacheSpec, category: Category, m: Mismatch, frame: Frame, found: dict) -> dict:
    """What fits at one example byte: the quotient, the moved token, the other format's value, the scales."""
    c = m.coordinate
    block_i = int(torch.searchsorted(frame.blocks, torch.tensor(c.block, device=frame.blocks.device)))  # blocks ascend
    group = c.group if c.group is not None else c.dim // spec.quant_block_size
    unit = (block_i * spec.block_size + c.token) * spec.groups_per_token + group
    source = int(frame.source[unit])
    if category is Category.STRAY_WRITE:
        return {"slot_owner": source} if source >= 0 else {}
    if category in (Category.UNWRITTEN, Category.SHIFT, Category.PERMUTATION):
        return {}
    if category is Category.LAYOUT:
        other = Layout(found["layout_found"]) if found.get("layout_found") else other_layout(spec)
        owner = spec.replace(layout=other).locate(c.block * spec.block_bytes + c.byte_in_block)
        return {"layout": other.value, "token": owner.token, "dim": owner.dim, "scale_group": owner.group}
    scales = {"baseline_scale": float(frame.base_w[unit]), "candidate_scale": float(frame.cand_w[unit]),
              "baseline_scale_word": _word_hex(frame.base_wb[unit]),
              "candidate_scale_word": _word_hex(frame.cand_wb[unit])}
    if c.region is Region.SCALE or category in SCALE_CAUSES:
        return scales if c.region is Region.SCALE or source >= 0 else {}
    if source < 0:
        return {}
    x = float(frame.k[source, c.dim].float())
    s = float(frame.quotient_scale(torch.tensor(unit)))
    facts = {"x": x, "s": s, "quotient": x / s if s else math.nan}
    if category is Category.FP8_FORMAT:
        other = pairs.other_format(spec.fp8)
        return {"format": other.value, "candidate_value": fp8.decode_byte(m.candidate_byte, other)}
    if category is Category.ROUNDING:
        x32, s32 = torch.tensor(x, dtype=torch.float32), torch.tensor(s, dtype=torch.float32)
        facts |= {"quotient_fp32": float(x32 / s32), "quotient_reciprocal_fp32": float(x32 * (1 / s32))}
    return facts
