"""Causes in words, from their typed facts (the diagnosis holds no prose); hints point at docs/NUMERICS.md."""

from __future__ import annotations

from itertools import groupby, islice

from .model import Category, Cause, Diagnosis
from .scales import E5M2_MAX
from ..core.spec import CacheSpec, FP8Format, Layout
from .example_words import describe_example, example_note
from ..core.errors import plural

NUMERICS = "docs/NUMERICS.md"
MOVED = " (the values of those groups move with their scale)"
# what each DIV seen in real writers is: a format's max, or vLLM's own e4m3fnuz divisor
DIVISOR_NAMES = {fmt.max: f"{fmt.value}'s max" for fmt in FP8Format} | {
    fmt.vllm_divisor: f"vLLM's {fmt.value} divisor" for fmt in FP8Format if fmt.vllm_divisor != fmt.max} | {
    E5M2_MAX: "e5m2's max"}


def percent(part: int, whole: int) -> str:
    """A share in percent that never hides a difference: two significant digits below 1% (a non-zero part is
    never 0.0%), and a part short of the whole never 100.0%."""
    if not whole:
        return "-"
    share = 100.0 * part / whole
    if 0 < share < 1:
        return f"{share:.2g}%"
    if part < whole and share >= 99.95:
        return ">99.9%"
    return f"{share:.1f}%"


def block_ranges(blocks: tuple[int, ...], limit: int = 6) -> str:
    """Block ids as ranges: (0, 1, 2, 5) -> '0-2, 5'; long lists end with the count."""
    if not blocks:
        return "outside the cache"
    # runs of consecutive ids share block - position; past limit + 1 runs the rest only adds "..."
    runs = [[b for _, b in run]
            for _, run in islice(groupby(enumerate(blocks), lambda p: p[1] - p[0]), limit + 1)]
    shown = ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs[:limit])
    if len(runs) > limit:
        shown += ", ..."
    return shown if len(blocks) == 1 else f"{shown} ({len(blocks)} blocks)"


def _unwritten(f: dict, spec: CacheSpec) -> tuple[str, str]:
    groups, words = f.get("value_groups_unwritten", 0), f.get("scale_words_unwritten", 0)
    base_side = f["baseline_poison_bytes"] + f["baseline_poison_scales"]
    side = "; in some, the baseline left poison where the candidate wrote" if base_side else ""
    if words and not groups:
        return (f"The candidate left the poison fill in {plural(words, 'scale word')} whose values it wrote{side}.",
                "the scale store is missing or masked off: check the scale store (its pointer, index and mask)")
    if groups and not words:
        return (f"The candidate left the poison fill in the values of {plural(groups, 'quant group')} whose scales"
                f" it wrote{side}.",
                "the value store is missing or masked off: check the value store (its pointer, offsets and mask)")
    tokens = f["tokens_never_written"]
    whole = f", {plural(tokens, 'token')} never written at all" if tokens else ""
    return (f"The candidate left the poison fill where the baseline wrote{whole}{side}.",
            "every token with slot >= 0 must be written: check that the grid covers all tokens")


STRAY_KINDS = (  # real tokens' slots overwritten: (facts key, by what, hint)
    ("foreign", "overwritten by a row no token has (all or part of its values and scale)",
     "a lane or program with no token wrote: check the stores' masks, the token mask (token < num_tokens, not"
     " <=) and the grid (cdiv(num_tokens, TOKENS) programs)"),
    ("copied", "overwritten by another token's row (values and scale)",
     "two tokens stored to one slot: check the slot each token's store uses (the slot_mapping load and its"
     " token index)"),
    ("overwritten", "overwritten by padding tokens (slot < 0)",
     "tokens with slot < 0 must write nothing; if padding goes to a dummy slot (SGLang), give that slot with"
     " --pad-slot and keep real tokens out of it"),
)


def _stray_write(f: dict, spec: CacheSpec) -> tuple[str, str]:
    outside = "guard bytes, or the buffer's other layers" if spec.layers > 1 else "guard bytes"
    where = [f"{f['guard_bytes']} outside the cache ({outside})"] if f["guard_bytes"] else []
    if f["slot_bytes"]:
        where.append(f"{f['slot_bytes']} in slots no token maps to")
    for key, what, hint in STRAY_KINDS:
        if f.get(f"{key}_bytes"):
            where.append(f"{f[key + '_bytes']} in {plural(f[key + '_slots'], 'slot')} of real tokens, {what}")
            return f"Bytes changed where no token of this slot mapping writes: {', '.join(where)}.", hint
    return (f"Bytes changed where no slot maps: {', '.join(where)}.",
            "tokens with slot < 0 must write nothing, and every store must stay inside the cache")


CONVENTIONS = {
    "nvidia": "truncated toward zero, negatives to 0, over 255 wrapped: NVIDIA's conversion",
    "wrap": "truncated toward zero, negatives wrapped mod 256 (-1 -> 255): numpy, Triton's own CPU interpreter, AMD",
    "trunc": "truncated toward zero",
}


def _integer_cast(f: dict, spec: CacheSpec) -> tuple[str, str]:
    return (f"Value bytes are x/s converted to an integer ({CONVENTIONS[f['convention']]}), not FP8 codes:"
            " the value region was not viewed as FP8.",
            f"view the value region as {spec.fp8.torch_dtype()} before launching (a uint8 view turns the"
            " kernel's cast into a float -> uint8 conversion)")


def _layout(f: dict, spec: CacheSpec) -> tuple[str, str]:
    found = f["layout_found"] or "another"
    if Layout.INTERLEAVED.value in (found, spec.layout.value):
        record = "each token as one [values | scales] record (interleaved)"
        planar = "all values of a block, then all its scales (planar)"
        written, wanted = (record, planar) if found == Layout.INTERLEAVED.value else (planar, record)
        return (f"Values and scales are right but stored {written}; the spec expects {wanted}.",
                f"write (or read, with --layout {found}) the block as the reader expects; the two agree only at"
                " block size 1")
    return (f"The values are right but stored in {found} order; the spec expects {spec.layout.value} order.",
            f"write the value region in {spec.layout.value} order (vLLM: shuffle when block_size > 1, linear when"
            f" 1), or check with --layout {found} if that is what the reader expects")


def _fp8_format(f: dict, spec: CacheSpec) -> tuple[str, str]:
    return (f"Value bytes encode the right values in {f['format_found']}, not {spec.fp8.value}.",
            f"cast to {spec.fp8.torch_dtype()}; vLLM picks e4m3fnuz only on gfx94* (MI300, MI325)")


def _scale_ratio(f: dict, spec: CacheSpec) -> tuple[str, str]:
    ratio, pair = f["ratio"], f["divisors"]
    if pair:
        a, b = pair
        hint = (f"s = amax / DIV: the ratio suggests DIV {a:g} ({DIVISOR_NAMES[a]}) in the baseline against {b:g}"
                f" ({DIVISOR_NAMES[b]}) in the candidate")
    elif f.get("divisor_range"):
        low, high = f["divisor_range"]
        implied = f"DIV = {low:.6g}" if high <= low * (1 + 1e-4) else f"DIV in [{low:.6g}, {high:.6g})"
        hint = (f"s = max(amax, 1e-4) / DIV: the candidate's scales imply {implied}: check the divisor constant"
                " (and the clamp bound that goes with it)")
    else:
        hint = "compare the two writers' DIV in s = max(amax, 1e-4) / DIV"
    return (f"Candidate scales are {ratio:.6g}x the baseline's{MOVED}.", f"{hint} ({NUMERICS}#writer-numerics)")


def _scale_pow2(f: dict, spec: CacheSpec) -> tuple[str, str]:
    direction = "2x" if f["direction"] == "doubled" else "half"
    return (f"ue8m0 scales are exactly {direction} the baseline's on groups whose amax / DIV sits on a power of"
            f" two: the ceil flipped{MOVED}.",
            "compute s = amax / DIV with an exact division (tl.math.div_rn; Triton's `/` is approximate on"
            " NVIDIA) before ceil(log2(s))")


def _scale_ulp(f: dict, spec: CacheSpec) -> tuple[str, str]:
    return (f"fp32 scales differ in their last bits (at most {f['max_ulp']} ulp){MOVED}.",
            "compute s = max(amax, 1e-4) / DIV with one IEEE division, as the reference does (not"
            " amax * (1/DIV) or an approximate division)")


def _rounding(f: dict, spec: CacheSpec) -> tuple[str, str]:
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


def _saturation_nan(f: dict, spec: CacheSpec) -> tuple[str, str]:
    return (f"Value bytes are +-max on one side and NaN or an unclipped code on the other (the"
            f" {f['nan_side']} has the NaNs).",
            f"clamp x/s to +-{spec.fp8.max:g} before the FP8 cast (torch before 2.13 and the Triton interpreter"
            " do not saturate)")


def _signed_zero(f: dict, spec: CacheSpec) -> tuple[str, str]:
    hint = ("a -0.0 encodes as 0x80 in e4m3fn: keep the sign bit of zero" if spec.fp8 is FP8Format.E4M3FN
            else "e4m3fnuz has no -0 (0x80 is its only NaN): a -0.0 must become 0x00")
    return (f"Zeros differ in sign: 0x00 on one side, 0x80 on the other (the {f['negative_side']} has"
            " 0x80).", hint)


def _amax_floor(f: dict, spec: CacheSpec) -> tuple[str, str]:
    found = f["floor_found"]
    if found is None:
        floor = "a lower floor"
    elif f["floor_bound"] == "exact":
        floor = f"a floor of {found:g}" + (" (LMDeploy's)" if found == 1e-6 else "")
    elif f["floor_bound"] == "range":  # a power-of-two scale bounds the floor: F / DIV rounds up to it
        floor = f"a floor above {found / 2:.2g} and at most {found:.2g}"
    else:
        floor = f"a floor of at most {found:.2g} (no group's amax is below it)"
    return (f"Scales differ on {plural(f['groups'], 'group')} whose amax is below {f['floor_expected']:g}: the"
            f" candidate uses {floor} in s = max(amax, floor) / DIV where the baseline uses {f['floor_expected']:g}"
            f"{MOVED}.",
            f"floor amax at {f['floor_expected']:g} as vLLM, aiter and SGLang do (LMDeploy 0.18.0 uses 1e-6);"
            f" inputs with tiny rows (--inputs tiny) show it ({NUMERICS}#writer-numerics)")


def _ue8m0_rounding(f: dict, spec: CacheSpec) -> tuple[str, str]:
    flag = "check the flag that selects it (the scale_fmt argument, an inverted condition)"
    if f["direction"] == "none":
        return (f"Scales on {plural(f['groups'], 'group')} are s = max(amax, 1e-4) / DIV not rounded to a power of"
                f" two, where the spec's scales are ue8m0{MOVED}.",
                f"the ue8m0 rounding s = 2 ** ceil(log2(s)) is skipped: {flag}")
    if f["direction"] == "ceil":
        return (f"Scales on {plural(f['groups'], 'group')} are rounded up to a power of two (ue8m0) where the spec's"
                f" scales are plain fp32{MOVED}.", f"the ue8m0 rounding is applied where it must not be: {flag}")
    return (f"ue8m0 scales are half the baseline's on {plural(f['groups'], 'group')}: the candidate"
            f" rounds log2(s) down (floor) where ue8m0 rounds it up (ceil){MOVED}.",
            "s = 2 ** ceil(log2(s)): with a floor x/s exceeds the format's max and saturates")


def _scale_swap(f: dict, spec: CacheSpec) -> tuple[str, str]:
    return (f"{plural(f['words'], 'scale word')} hold the scale of the neighbouring token, which holds"
            " theirs: scales stored swapped between tokens.",
            "store token t's scale at scale_offset(t, group): check the scale index of each token")


MOVED_WHAT = {"rows": "rows (values and scales)", "values": "value rows (their scales are right)",
              "scales": "scale words (their values are right)"}
MOVED_HINT = {
    "rows": "an off-by-one in the store's slot: check the slot index (the slot_mapping load, slot // block_size,"
            " slot % block_size) of both stores",
    "values": "the value store's offset: check its token term (slot % block_size, the tile offset)",
    "scales": "the scale store's index: check its token term (scale_offset(t, group)) and the token it reads",
}


def _shift(f: dict, spec: CacheSpec) -> tuple[str, str]:
    k = f["offset"]
    if f["by"] == "slots":
        where = (f"stored {plural(abs(k), 'slot')} {'further on' if k > 0 else 'earlier'}: slot s holds what"
                 f" belongs at slot s{'-' if k > 0 else '+'}{abs(k)}")
        hint = MOVED_HINT[f["moved"]]
    else:
        where = (f"of the wrong token: the slot of token t holds token t{'+' if k > 0 else '-'}{abs(k)}'s"
                 f" {'scale' if f['moved'] == 'scales' else 'row'}")
        hint = f"the token index of the load: check the program id and the row offset of k (token t{k:+d})"
    return f"{MOVED_WHAT[f['moved']].capitalize()} are {where}.", hint


def _permutation(f: dict, spec: CacheSpec) -> tuple[str, str]:
    how = f["permutation"]
    if how == "moved":
        neighbour = f" ({f['from_neighbour']} from the neighbouring block)" if f["from_neighbour"] else ""
        return (f"The values are right but at other places: {f['moved_positions']} value positions of a"
                f" block hold the code of another position{neighbour}, the same way in every block.",
                "the value store's offset: check each term (token row, dim column, tile offsets) and its"
                " sign, and the offsets of the load of k")
    what = ("transposed (token and dim exchanged)" if how == "transposed"
            else f"{how}" if how != "permuted" else "permuted the same way in every tile")
    return (f"The values are right but inside each 16x16 tile of the shuffle layout they are {what}"
            f" ({f['moved_positions']} of 256 positions move).",
            "the tile offset (t//16)*16*head_dim + (d//16)*256 + (t%16)*16 + d%16: check the order of its last"
            " two terms (token row, dim column)")


CLAMP_HINT = "the clamp of x / s: min(max(y, -max), max), with its min and max in that order"
QUOTIENT_WORDS = {
    "x * s": ("fp8(x * s): the scale multiplied where it divides", "the value's quotient: x / s (or x * (1/s))"),
    "x": ("fp8(x): the input not divided by its scale at all", "the value's quotient: x / s before the FP8 cast"),
    "-max": ("-max for every value: clamped to the lower bound", CLAMP_HINT),
    "+max": ("+max for every value: clamped to the upper bound", CLAMP_HINT),
}


def _quotient(f: dict, spec: CacheSpec) -> tuple[str, str]:
    what, hint = QUOTIENT_WORDS[f["computed"]]
    return f"Value bytes are {what}, where they are fp8(x / s) (the scales are right).", hint


AMAX_WORDS = {
    "max(x)": ("max(x), the signed maximum, where amax is max(|x|)",
               "take the absolute value before the max: amax = max(|x|) (tl.max(tl.abs(x)))"),
    "min(x)": ("min(x) where amax is max(|x|)", "amax is the max of |x|: check the reduction (max, not min) and the abs"),
    "min(|x|)": ("min(|x|), the smallest magnitude, where amax is max(|x|)",
                 "the amax reduction must be a max: check its combiner (max, not min)"),
    "min(amax, floor)": ("min(amax, 1e-4): the floor applied as a ceiling",
                         "s = max(amax, 1e-4) / DIV: the floor is a maximum, not a minimum"),
    "token": ("max(|x|) over the whole token where each quant group has its own",
              "the amax reduction's range: one amax per quant group of quant_block_size elements"),
    "first half": ("max(|x|) over the first half of the group only", "the amax reduction's range or mask"),
    "second half": ("max(|x|) over the second half of the group only", "the amax reduction's range or mask"),
}


def _amax(f: dict, spec: CacheSpec) -> tuple[str, str]:
    if f["amax"] == "max(|x|) * DIV":
        return (f"{plural(f['words'], 'scale word')} are s = max(amax, 1e-4) * {f['divisor']:g}: the divisor"
                f" multiplies{MOVED}.", "s = max(amax, 1e-4) / DIV: check the operator of the scale formula (or the"
                " reciprocal 1 / DIV it uses)")
    what, hint = AMAX_WORDS[f["amax"]]
    return (f"{plural(f['words'], 'scale word')} are s = max(amax, 1e-4) / {f['divisor']:g} with amax ="
            f" {what}{MOVED}.", hint)


STORED = {"fp32": "one fp32 word", "ue8m0": "one fp32 word (a power of two)",
          "ue8m0x4": "four equal UE8M0 bytes (vLLM's mxfp8)"}


def _scale_format(f: dict, spec: CacheSpec) -> tuple[str, str]:
    if f["format_found"] == "fp32":
        return (f"{plural(f['words'], 'scale word')} hold a plain fp32 scale (not rounded to a power of two)"
                f" where the spec stores {STORED[f['format_expected']]}: the writer ignored --scale-fmt"
                f" {f['format_expected']} and quantized as with fp32 scales.",
                "give the writer a scale format it supports (check it with --scale-fmt fp32), or make it refuse"
                " the ones it does not")
    return (f"{plural(f['words'], 'scale word')} hold the right scale stored as {STORED[f['format_found']]}, where"
            f" the spec stores {STORED[f['format_expected']]}.",
            f"check with --scale-fmt {f['format_found']} if that is what the reader expects")


def _non_finite(f: dict, spec: CacheSpec) -> tuple[str, str]:
    return (f"Bytes of {plural(f['groups'], 'quant group')} whose input holds NaN ({f['nan_groups']}) or inf"
            f" ({f['inf_groups']}): the writers disagree on non-finite inputs, and no convention is shared.",
            "real writers differ here (aiter drops NaN from amax; others propagate it): leave inf and NaN out of"
            " the inputs (no --specials-inf-nan) unless this is what you check")


def _zero_input(f: dict, spec: CacheSpec) -> tuple[str, str]:
    return (f"{plural(f['groups'], 'quant group')} hold the quantization of an all-zero input (every code"
            " 0, the scale of amax 0) where k is not zero: the load of k returned zeros.",
            "the load of k: check its offsets (token row, dim column) and its mask (other=0.0 where it is off)")


def _unknown(f: dict, spec: CacheSpec) -> tuple[str, None]:
    return "These bytes fit no known cause; the examples show both sides.", None


WORDS = {
    Category.UNWRITTEN: _unwritten, Category.STRAY_WRITE: _stray_write, Category.INTEGER_CAST: _integer_cast,
    Category.LAYOUT: _layout, Category.FP8_FORMAT: _fp8_format, Category.SCALE_RATIO: _scale_ratio,
    Category.SCALE_POW2: _scale_pow2, Category.SCALE_ULP: _scale_ulp, Category.ROUNDING: _rounding,
    Category.SATURATION_NAN: _saturation_nan, Category.SIGNED_ZERO: _signed_zero, Category.AMAX_FLOOR: _amax_floor,
    Category.UE8M0_ROUNDING: _ue8m0_rounding, Category.SCALE_SWAP: _scale_swap, Category.SCALE_FORMAT: _scale_format,
    Category.NON_FINITE: _non_finite, Category.SHIFT: _shift, Category.PERMUTATION: _permutation,
    Category.AMAX: _amax, Category.QUOTIENT: _quotient, Category.ZERO_INPUT: _zero_input,
    Category.UNKNOWN: _unknown,
}


def explain(cause: Cause, spec: CacheSpec) -> tuple[str, str | None]:
    """(one sentence saying what was found, a hint or None); the bytes and blocks are the cause's own."""
    return WORDS[cause.category](cause.facts, spec)


def top_cause(diagnosis: Diagnosis, spec: CacheSpec) -> str | None:
    """`category (N bytes): explanation` of the cause with the most bytes, or None."""
    cause = diagnosis.top
    return cause and f"{cause.category.value} ({cause.bytes} bytes): {explain(cause, spec)[0]}"


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
