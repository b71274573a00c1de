"""Causes in words: the explanation, the hint and the example notes of a diagnosis, from its typed facts.

Pure functions of (category, facts, spec); the diagnosis itself holds no prose. Hints point at
docs/NUMERICS.md, the user-facing page of the numeric facts.
"""

from __future__ import annotations

import math

from .model import Category, Cause, Diagnosis, Example
from .scales import E5M2_MAX
from ..spec import CacheSpec, FP8Format, Region

NUMERICS = "docs/NUMERICS.md"
MOVED = " (the values of those groups move with their scale)"


def divisor_names() -> dict[float, str]:
    """What each DIV seen in real writers is (SPEC: the format's max, or vLLM's own e4m3fnuz divisor)."""
    names = {fmt.max: f"{fmt.value}'s max" for fmt in FP8Format}
    names |= {fmt.vllm_divisor: f"vLLM's {fmt.value} divisor" for fmt in FP8Format if fmt.vllm_divisor != fmt.max}
    return names | {E5M2_MAX: "e5m2's max"}


def percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def block_ranges(blocks: tuple[int, ...], limit: int = 6) -> str:
    """Block ids as ranges: (0, 1, 2, 5) -> '0-2, 5'; long lists end with the count."""
    if not blocks:
        return "outside the cache"
    ranges: list[list[int]] = []
    for block in blocks:
        if ranges and block == ranges[-1][1] + 1:
            ranges[-1][1] = block
        elif len(ranges) > limit:  # enough to print: the rest only adds "..."
            break
        else:
            ranges.append([block, block])
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges[:limit])
    if len(ranges) > limit:
        shown += ", ..."
    return shown if len(blocks) == 1 else f"{shown} ({len(blocks)} blocks)"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _unwritten(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    f = cause.facts
    tokens = f["tokens_never_written"]
    whole = f", {_plural(tokens, 'token')} never written at all" if tokens else ""
    base_side = f["baseline_poison_bytes"] + f["baseline_poison_scales"]
    side = "; in some, the baseline left poison where the candidate wrote" if base_side else ""
    return (f"The candidate left the poison fill where the baseline wrote{whole}{side}.",
            "every token with slot >= 0 must be written: check that the grid covers all tokens")


def _stray_write(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    f = cause.facts
    where = [f"{f['guard_bytes']} outside the cache (guard bytes)"] if f["guard_bytes"] else []
    if f["slot_bytes"]:
        where.append(f"{f['slot_bytes']} in slots no token maps to")
    return (f"Bytes changed where no slot maps: {', '.join(where)}.",
            "tokens with slot < 0 must write nothing, and every store must stay inside the cache")


CONVENTIONS = {
    "nvidia": "truncated toward zero, negatives to 0, over 255 wrapped: NVIDIA's conversion",
    "wrap": "truncated toward zero, negatives wrapped mod 256 (-1 -> 255): numpy, the Triton interpreter",
    "trunc": "truncated toward zero",
}


def _integer_cast(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    convention = CONVENTIONS[cause.facts["convention"]]
    return (f"Value bytes are x/s converted to an integer ({convention}), not FP8 codes: the value region was"
            " not viewed as FP8.",
            f"view the value region as {spec.fp8.torch_dtype()} before launching (a uint8 view turns the"
            " kernel's cast into a float -> uint8 conversion)")


def _layout(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    found = cause.facts["layout_found"] or "another"
    return (f"The values are right but stored in {found} order; the spec expects {spec.layout.value} order.",
            f"write the value region in {spec.layout.value} order (vLLM: shuffle when block_size > 1, linear when"
            f" 1), or check with --layout {found} if that is what the reader expects")


def _fp8_format(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    return (f"Value bytes encode the right values in {cause.facts['format_found']}, not {spec.fp8.value}.",
            f"cast to {spec.fp8.torch_dtype()}; vLLM picks e4m3fnuz only on gfx94* (MI300, MI325)")


def _scale_ratio(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    ratio, pair = cause.facts["ratio"], cause.facts["divisors"]
    names = divisor_names()
    if pair:
        a, b = pair
        hint = (f"s = amax / DIV: the ratio suggests DIV {a:g} ({names[a]}) in the baseline against {b:g}"
                f" ({names[b]}) in the candidate")
    else:
        hint = "compare the two writers' DIV in s = max(amax, 1e-4) / DIV"
    return (f"Candidate scales are {ratio:.6g}x the baseline's{MOVED}.", f"{hint} ({NUMERICS}#writer-numerics)")


def _scale_pow2(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    direction = "2x" if cause.facts["direction"] == "doubled" else "half"
    return (f"ue8m0 scales are exactly {direction} the baseline's on groups whose amax / DIV sits on a power of"
            f" two: the ceil flipped{MOVED}.",
            "compute s = amax / DIV with an exact division (tl.math.div_rn; Triton's `/` is approximate on"
            " NVIDIA) before ceil(log2(s))")


def _scale_ulp(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    return (f"fp32 scales differ in their last bits (at most {cause.facts['max_ulp']} ulp){MOVED}.",
            "compute s = max(amax, 1e-4) / DIV with one IEEE division, as the reference does (not"
            " amax * (1/DIV) or an approximate division)")


def _rounding(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    f = cause.facts
    if f["ties_to_even"]:
        even = f["ties_to_even"]
        odd = "candidate" if even == "baseline" else "baseline"
        return (f"Value codes are one apart with equal scales, at exact ties: the {even} rounds ties to even, the"
                f" {odd} does not (e.g. away from zero).",
                f"round to nearest, ties to even, after clamping to +-max ({NUMERICS}#fp8-formats)")
    at_ties = f" ({f['ties']} at exact ties)" if f["ties"] else ""
    return (f"Value codes are one apart with equal scales{at_ties}: the two writers' fp32 quotients x/s differ"
            " in the last bit.",
            "compute values as the baseline does: aiter multiplies by fl(1/s), vLLM divides x / s (with ue8m0"
            " scales both are exact)")


def _saturation_nan(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    return (f"Value bytes are +-max on one side and NaN or an unclipped code on the other (the"
            f" {cause.facts['nan_side']} has the NaNs).",
            f"clamp x/s to +-{spec.fp8.max:g} before the FP8 cast (torch before 2.13 and the Triton interpreter"
            " do not saturate)")


def _signed_zero(cause: Cause, spec: CacheSpec) -> tuple[str, str]:
    hint = ("a -0.0 encodes as 0x80 in e4m3fn: keep the sign bit of zero" if spec.fp8 is FP8Format.E4M3FN
            else "e4m3fnuz has no -0 (0x80 is its only NaN): a -0.0 must become 0x00")
    return (f"Zeros differ in sign: 0x00 on one side, 0x80 on the other (the {cause.facts['negative_side']} has"
            " 0x80).", hint)


def _unknown(cause: Cause, spec: CacheSpec) -> tuple[str, None]:
    return "These bytes fit no known cause; the examples show both sides.", None


WORDS = {
    Category.UNWRITTEN: _unwritten, Category.STRAY_WRITE: _stray_write, Category.INTEGER_CAST: _integer_cast,
    Category.LAYOUT: _layout, Category.FP8_FORMAT: _fp8_format, Category.SCALE_RATIO: _scale_ratio,
    Category.SCALE_POW2: _scale_pow2, Category.SCALE_ULP: _scale_ulp, Category.ROUNDING: _rounding,
    Category.SATURATION_NAN: _saturation_nan, Category.SIGNED_ZERO: _signed_zero, Category.UNKNOWN: _unknown,
}


def explain(cause: Cause, spec: CacheSpec) -> tuple[str, str | None]:
    """(one sentence saying what was found, a hint or None); the bytes and blocks are the cause's own."""
    return WORDS[cause.category](cause, spec)


def top_cause(diagnosis: Diagnosis, spec: CacheSpec) -> str | None:
    """`category (N bytes): explanation` of the cause with the most bytes, or None."""
    cause = diagnosis.top
    if cause is None:
        return None
    return f"{cause.category.value} ({cause.bytes} bytes): {explain(cause, spec)[0]}"


def causes_text(diagnosis: Diagnosis, spec: CacheSpec) -> list[str]:
    """Every cause with its hint and first example, as plain lines."""
    lines = []
    for cause in diagnosis:
        explanation, hint = explain(cause, spec)
        lines.append(f"{cause.category.value}: {cause.bytes} bytes in blocks {block_ranges(cause.blocks)}:"
                     f" {explanation}")
        if hint:
            lines.append(f"  fix: {hint}")
        if cause.examples:
            lines.append(f"  e.g. {describe_example(cause.category, cause.examples[0])}")
    return lines


# ---- examples ----------------------------------------------------------------------------------------------


def _scales_note(f: dict) -> str:
    base, cand = f["baseline_scale"], f["candidate_scale"]
    ratio = f", x{cand / base:.6g}" if base and math.isfinite(base) and math.isfinite(cand) else ""
    return f"scales {base:g} vs {cand:g}{ratio}"


def _value_note(category: Category, example: Example) -> str:
    f = example.facts
    if category is Category.INTEGER_CAST:
        y = f["quotient"]
        whole = math.trunc(y) if math.isfinite(y) else None
        return f"x/s = {y:.6g}" + (f", trunc {whole} = 0x{whole % 256:02x} mod 256" if whole is not None else "")
    if category is Category.LAYOUT:
        return f"the {f['layout']} layout puts token {f['token']}, dim {f['dim']} at this byte"
    if category is Category.FP8_FORMAT:
        return f"0x{example.candidate_byte:02x} is {f['candidate_value']:g} in {f['format']}"
    if category in (Category.SCALE_RATIO, Category.SCALE_POW2, Category.SCALE_ULP):
        return f"this group's scales: {f['baseline_scale']:g} vs {f['candidate_scale']:g}"
    if category is Category.ROUNDING:
        return (f"x = {f['x']:g}, x/s = {f['quotient']!r} exactly; in fp32 x / s = {f['quotient_fp32']!r},"
                f" x * (1/s) = {f['quotient_reciprocal_fp32']!r}")
    return f"x = {f['x']:g}, x/s = {f['quotient']!r}"


def example_note(category: Category, example: Example) -> str | None:
    """What fits at one example byte: the quotient, the moved token, the other format's value, the scales."""
    if example.coordinate is None:
        return "outside the cache handed to the writer"
    if category is Category.STRAY_WRITE:
        return "no token maps to this slot"
    if category is Category.UNWRITTEN:
        return "the poison fill is still there"
    if not example.facts:
        return None
    if example.coordinate.region is Region.SCALE:
        return _scales_note(example.facts)
    return _value_note(category, example)


def describe_example(category: Category, example: Example) -> str:
    """`where: baseline 0x.. (value), candidate 0x.. (value); note`."""
    def show(byte: int, value: float | None) -> str:
        return f"0x{byte:02x}" if value is None else f"0x{byte:02x} ({value:g})"

    text = f"{example.where()}: baseline {show(example.baseline_byte, example.baseline_value)}, " \
           f"candidate {show(example.candidate_byte, example.candidate_value)}"
    note = example_note(category, example)
    return f"{text}; {note}" if note else text


# ---- JSON ----------------------------------------------------------------------------------------------


def cause_json(cause: Cause, spec: CacheSpec) -> dict:
    """{category, bytes, blocks, facts, explanation, hint, examples}; each example with its note."""
    explanation, hint = explain(cause, spec)
    core = cause.to_dict()
    examples = [{**e.to_dict(), "note": example_note(cause.category, e)} for e in cause.examples]
    return {"category": core["category"], "bytes": core["bytes"], "blocks": core["blocks"], "facts": core["facts"],
            "explanation": explanation, "hint": hint, "examples": examples}


def diagnosis_json(diagnosis: Diagnosis, spec: CacheSpec) -> list[dict]:
    return [cause_json(cause, spec) for cause in diagnosis]
