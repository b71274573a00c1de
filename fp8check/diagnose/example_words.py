"""The words of one example byte of a cause (words.py writes the causes): both bytes, both decoded values,
and what the cause says about them."""

from __future__ import annotations

import math

from .model import Category, Example
from ..core.errors import plural
from ..core.fp8 import decode_scale_word
from ..core.spec import Region, ScaleFormat


def scale_pair(f: dict) -> str:
    """The two scales of an example's facts: `0.0078125 vs 0.00390625`; where the two print alike, with the
    words in hex and the distance in ulps (never "0.00453404 vs 0.00453404")."""
    base, cand = f["baseline_scale"], f["candidate_scale"]
    base_word, cand_word = f.get("baseline_scale_word"), f.get("candidate_scale_word")
    if f"{base:g}" != f"{cand:g}" or base_word is None or base_word == cand_word:
        return f"{base:g} vs {cand:g}"
    text = f"{base:.9g} ({base_word}) vs {cand:.9g} ({cand_word})"
    if math.isfinite(base) and math.isfinite(cand) and (base > 0) == (cand > 0):
        text += f", {plural(abs(int(base_word, 16) - int(cand_word, 16)), 'ulp')} apart"
    return text


def example_note(category: Category, example: Example) -> str | None:
    """What fits at one example byte: the quotient, the moved token, the other format's value, the scales."""
    f = example.facts
    if example.coordinate is None:
        return "outside the cache handed to the writer"
    if category is Category.STRAY_WRITE:
        if f.get("slot_owner") is not None:
            return f"token {f['slot_owner']} owns this slot; another row was written over it"
        return "no token maps to this slot"
    if category is Category.UNWRITTEN:
        return "the poison fill is still there"
    if not f:
        return None
    if category is Category.SCALE_FORMAT and f.get("candidate_scale_word"):
        return f"the candidate's word {f['candidate_scale_word']} is {_word(int(f['candidate_scale_word'], 16))}"
    if example.coordinate.region is Region.SCALE and category is not Category.LAYOUT:
        base, cand = f["baseline_scale"], f["candidate_scale"]
        shown = base and math.isfinite(base) and math.isfinite(cand) and f"{base:g}" != f"{cand:g}"
        return f"scales {scale_pair(f)}" + (f", x{cand / base:.6g}" if shown else "")
    if category is Category.ZERO_INPUT and "x" in f:  # the candidate quantized 0, not x: no x/s of its scale
        return f"x = {f['x']:g}, written as the code of 0 (its group was quantized from zeros)"
    if category is Category.INTEGER_CAST:
        return f"x/s = {f['quotient']:.6g}" + _integer_of(f["quotient"], example.candidate_byte)
    if category is Category.LAYOUT:
        what = f"dim {f['dim']}" if f.get("dim") is not None else f"scale group {f.get('scale_group')}"
        return f"the {f['layout']} layout puts token {f['token']}, {what} at this byte"
    if category is Category.FP8_FORMAT:
        return f"0x{example.candidate_byte:02x} is {f['candidate_value']:g} in {f['format']}"
    if "baseline_scale" in f and "x" not in f:
        return f"this group's scales: {scale_pair(f)}"
    if category is Category.ROUNDING:
        return (f"x = {f['x']:g}, x/s = {f['quotient']!r} exactly; in fp32 x / s = {f['quotient_fp32']!r},"
                f" x * (1/s) = {f['quotient_reciprocal_fp32']!r}")
    return f"x = {f['x']:g}, x/s = {f['quotient']!r}"


def _word(word: int) -> str:
    """A scale word as what it holds: four equal UE8M0 bytes, or an fp32 scale."""
    raw = word.to_bytes(4, "little")
    if len(set(raw)) == 1:
        return f"four UE8M0 bytes 0x{raw[0]:02x} (scale {decode_scale_word(raw, ScaleFormat.UE8M0X4):g})"
    return f"the fp32 scale {decode_scale_word(raw, ScaleFormat.FP32):g}"


def _integer_of(y: float, byte: int) -> str:
    """How the candidate byte follows from the quotient under the conversion it shows (cast_match's)."""
    if not math.isfinite(y):
        return ""
    whole, floor = math.trunc(y), math.floor(y)
    if byte == whole % 256:
        return f", trunc {whole} = 0x{byte:02x} mod 256"
    if whole < 0 and byte == 0:
        return f", trunc {whole} < 0 gives 0 (NVIDIA's conversion)"
    if whole > 255 and byte == 255:
        return f", trunc {whole} saturates to 0xff"
    return f", floor {floor} = 0x{byte:02x} mod 256" if byte == floor % 256 else ""


def describe_example(category: Category, example: Example) -> str:
    """`where: baseline 0x.. (value), candidate 0x.. (value); note`."""
    def show(byte: int, value: float | None) -> str:
        return f"0x{byte:02x}" if value is None else f"0x{byte:02x} ({value:g})"

    text = f"{example.where()}: baseline {show(example.baseline_byte, example.baseline_value)}, " \
           f"candidate {show(example.candidate_byte, example.candidate_value)}"
    note = example_note(category, example)
    return f"{text}; {note}" if note else text
