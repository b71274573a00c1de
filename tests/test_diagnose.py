"""Why bytes differ: every planted fault is named first with its exact byte count and typed facts,
nothing is dropped, identical caches have no causes, and the CLI shows and writes the diagnosis."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run
from fp8check.core import fp8, pairs
from fp8check.producers import registry as producers
from fp8check.core.cache import GUARD_ALIGN, CacheBuffer, poison, poison_at
from fp8check.cli import main
from fp8check.run.compare import compare
from fp8check.diagnose import EXAMPLES, Category, diagnose
from fp8check.core.inputs import Distribution, SlotPattern, generate
from fp8check.diagnose.example_words import describe_example
from fp8check.diagnose.words import diagnosis_json, explain
from fp8check.core.spec import CacheSpec, FP8Format, Layout, Region, ScaleFormat

FAULTS = Path(__file__).parent / "faults"
CPU = torch.device("cpu")


def fault(name: str) -> str:
    return f"file:{FAULTS / name}.py:writer"


def run_pair(spec: CacheSpec, candidate: str, *, baseline: str = "reference", inputs=None, **generate_args):
    inputs = inputs if inputs is not None else generate(spec, seed=generate_args.pop("seed", 0), **generate_args)
    result = compare(spec, baseline=producers.resolve(baseline), candidate=producers.resolve(candidate),
                     inputs=inputs, device=CPU)
    return result, diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)


def value_region(spec: CacheSpec, buffer: CacheBuffer) -> torch.Tensor:
    return buffer.flat[:, : spec.value_bytes]


def scale_region(spec: CacheSpec, buffer: CacheBuffer) -> torch.Tensor:
    return buffer.flat[:, spec.value_bytes :]


def count(mask: torch.Tensor) -> int:
    return int(mask.sum())


def rows_of_slots(spec: CacheSpec, buffer: CacheBuffer, slots: torch.Tensor) -> torch.Tensor:
    """uint8 [n, row_bytes]: each slot's value bytes (token order) and scale bytes, read with spec.value_index."""
    device = buffer.flat.device
    slots = slots.to(device)
    block, token = slots // spec.block_size, slots % spec.block_size
    values = buffer.flat[block.view(-1, 1), spec.value_index(device)[token]]
    first = spec.value_bytes + 4 * spec.groups_per_token * token.view(-1, 1)
    scales = buffer.flat[block.view(-1, 1), first + torch.arange(4 * spec.groups_per_token, device=device)]
    return torch.cat([values, scales], dim=1)


# ---- the fault suite: one planted fault per writer, each named first with its exact byte count -------------
# Each `expected` function counts the fault's bytes from the two caches by its own definition, without
# fp8check.diagnose, so a wrong attribution (or a dropped byte) shows up as a different number.


def value_bytes_differ(spec, base, cand, inputs) -> int:
    assert torch.equal(scale_region(spec, base), scale_region(spec, cand)), "the fault leaves scales alone"
    return count(value_region(spec, base) != value_region(spec, cand))


def all_bytes_differ(spec, base, cand, inputs) -> int:
    return count(base.buffer != cand.buffer)


def flipped_pow2_groups(spec, base, cand, inputs) -> int:
    # groups whose amax / 448 is exactly a power of two: the approximate division's +1 ulp flips their ceil
    amax = inputs.k.cpu().float().view(-1, spec.groups_per_token, spec.quant_block_size).abs().amax(dim=-1)
    on_boundary = (torch.frexp(amax / 448).mantissa == 0.5).any(dim=1)
    slots = inputs.slot_mapping.cpu()[on_boundary]
    assert slots.numel() > 10, "ue8m0-boundary inputs put a third of the groups on the boundary"
    changed = count(rows_of_slots(spec, base, slots) != rows_of_slots(spec, cand, slots))
    assert changed == count(base.buffer != cand.buffer), "only the boundary groups change"
    return changed


def every_third_token(spec, base, cand, inputs) -> int:
    slots = inputs.slot_mapping.cpu()[torch.arange(inputs.slot_mapping.numel()) % 3 == 0]
    return count(rows_of_slots(spec, base, slots) != rows_of_slots(spec, cand, slots))


def one_code_apart(spec, base, cand, inputs) -> int:
    a, b = value_region(spec, base), value_region(spec, cand)
    differs = a != b
    assert bool((fp8.code_distance(a, b, spec.fp8)[differs] == 1).all())
    return count(differs)


def max_vs_nan(spec, base, cand, inputs) -> int:
    a, b = value_region(spec, base), value_region(spec, cand)
    return count(((a & 0x7F) == 0x7E) & ((b & 0x7F) == 0x7F))


def negative_zeros(spec, base, cand, inputs) -> int:
    return count((value_region(spec, base) == 0x80) & (value_region(spec, cand) == 0x00))


def every_fifth_token(spec, base, cand, inputs) -> int:
    slots = inputs.slot_mapping.cpu()[torch.arange(inputs.slot_mapping.numel()) % 5 == 4]
    return count(rows_of_slots(spec, base, slots) != rows_of_slots(spec, cand, slots))


def last_16_tokens(spec, base, cand, inputs) -> int:
    slots = inputs.slot_mapping.cpu()[-16:]
    changed = count(rows_of_slots(spec, base, slots) != rows_of_slots(spec, cand, slots))
    assert changed == count(base.buffer != cand.buffer), "only the last 16 tokens change"
    return changed


def slot_15(spec, base, cand, inputs) -> int:
    slot = torch.tensor([15])
    changed = count(rows_of_slots(spec, base, slot) != rows_of_slots(spec, cand, slot))
    assert changed == count(base.buffer != cand.buffer), "only slot 15 changes"
    return changed


def last_block(spec, base, cand, inputs) -> int:
    assert not bool((inputs.slot_mapping // spec.block_size == spec.num_blocks - 1).any()), "no token maps there"
    return count(base.flat[-1] != cand.flat[-1])


def guard_bytes(spec, base, cand, inputs) -> int:
    return count(base.guards != cand.guards)


def whole_tokens_moved(spec, base, cand, inputs) -> int:
    # interleaved against planar: every block a token maps into differs in values and scales alike
    assert not torch.equal(scale_region(spec, base), scale_region(spec, cand))
    return count(base.buffer != cand.buffer)


def scale_words(spec, buffer) -> torch.Tensor:
    return buffer.flat[:, spec.value_bytes :].contiguous().view(torch.float32)


def halved_scales(spec, base, cand, inputs) -> int:
    # every differing scale word is exactly half the baseline's, and only groups with a differing word differ
    a, b = scale_words(spec, base), scale_words(spec, cand)
    differs = a != b
    assert differs.sum() > 100 and bool((b[differs] * 2 == a[differs]).all())
    return count(base.buffer != cand.buffer)


def scale_bytes_only(spec, base, cand, inputs) -> int:
    assert torch.equal(value_region(spec, base), value_region(spec, cand)), "the fault leaves values alone"
    return count(scale_region(spec, base) != scale_region(spec, cand))


def slot_zero(spec, base, cand, inputs) -> int:
    changed = count(rows_of_slots(spec, base, torch.tensor([0])) != rows_of_slots(spec, cand, torch.tensor([0])))
    assert changed == count(base.buffer != cand.buffer), "only slot 0 changes"
    return changed


def tiny_amax_slots(spec, base, cand, inputs) -> int:
    amax = inputs.k.cpu().float().view(-1, spec.groups_per_token, spec.quant_block_size).abs().amax(dim=-1)
    slots = inputs.slot_mapping.cpu()[(amax < 1e-4).any(dim=1)]
    changed = count(rows_of_slots(spec, base, slots) != rows_of_slots(spec, cand, slots))
    assert changed == count(base.buffer != cand.buffer), "only groups with amax below 1e-4 change"
    return changed


def non_finite_slots(spec, base, cand, inputs) -> int:
    slots = inputs.slot_mapping.cpu()[~torch.isfinite(inputs.k.cpu().float()).all(dim=1)]
    changed = count(rows_of_slots(spec, base, slots) != rows_of_slots(spec, cand, slots))
    assert changed == count(base.buffer != cand.buffer), "only tokens with inf or NaN change"
    return changed


def negative_max_groups(spec, base, cand, inputs) -> int:
    # groups whose signed max is not their largest magnitude: only they can get another scale
    x = inputs.k.cpu().float().view(-1, spec.groups_per_token, spec.quant_block_size)
    negative = (x.amax(dim=-1) < x.abs().amax(dim=-1)).any(dim=1)
    slots = inputs.slot_mapping.cpu()[negative]
    changed = count(rows_of_slots(spec, base, slots) != rows_of_slots(spec, cand, slots))
    assert changed == count(base.buffer != cand.buffer), "only groups with a negative extreme change"
    return changed


@dataclass(frozen=True)
class Fault:
    name: str
    category: Category
    expected: object  # (spec, baseline, candidate, inputs) -> int
    spec: dict = field(default_factory=dict)
    distribution: Distribution = Distribution.NORMAL
    slots: SlotPattern = SlotPattern.SEQUENTIAL
    input_blocks: int | None = None  # generate inputs for fewer blocks than the cache has
    inf_nan: bool = False


FAULT_SUITE = [
    Fault("integer_cast_wrap", Category.INTEGER_CAST, value_bytes_differ),
    Fault("integer_cast_nvidia", Category.INTEGER_CAST, value_bytes_differ),
    Fault("linear_layout", Category.LAYOUT, value_bytes_differ),
    Fault("other_format", Category.FP8_FORMAT, value_bytes_differ),
    Fault("divisor_240", Category.SCALE_RATIO, all_bytes_differ, {"scale_fmt": ScaleFormat.FP32}),
    Fault("approx_division", Category.SCALE_POW2, flipped_pow2_groups, distribution=Distribution.UE8M0_BOUNDARY),
    Fault("scale_lastbit", Category.SCALE_ULP, every_third_token, {"scale_fmt": ScaleFormat.FP32}),
    Fault("ties_away", Category.ROUNDING, one_code_apart, distribution=Distribution.TIES),
    Fault("no_saturation", Category.SATURATION_NAN, max_vs_nan, distribution=Distribution.TIES),
    Fault("negative_zero", Category.SIGNED_ZERO, negative_zeros, distribution=Distribution.SPECIALS),
    Fault("skip_tokens", Category.UNWRITTEN, every_fifth_token),
    Fault("writes_padding", Category.STRAY_WRITE, last_block, {"num_blocks": 4}, slots=SlotPattern.PADDED,
          input_blocks=3),
    Fault("past_the_end", Category.STRAY_WRITE, guard_bytes),
    Fault("interleaved_layout", Category.LAYOUT, whole_tokens_moved, {"layout": Layout.LINEAR}),
    Fault("ue8m0_floor", Category.UE8M0_ROUNDING, halved_scales),
    Fault("swapped_scales", Category.SCALE_SWAP, scale_bytes_only, {"scale_fmt": ScaleFormat.FP32}),
    Fault("pads_to_slot_zero", Category.STRAY_WRITE, slot_zero, slots=SlotPattern.PADDED),
    Fault("amax_floor_1e6", Category.AMAX_FLOOR, tiny_amax_slots, {"scale_fmt": ScaleFormat.FP32},
          distribution=Distribution.TINY),
    Fault("finite_amax", Category.NON_FINITE, non_finite_slots, distribution=Distribution.SPECIALS, inf_nan=True),
    Fault("slot_shift", Category.SHIFT, all_bytes_differ),
    Fault("scale_shift", Category.SHIFT, scale_bytes_only),
    Fault("transposed_tile", Category.PERMUTATION, value_bytes_differ),
    Fault("reversed_dim_tiles", Category.PERMUTATION, value_bytes_differ),
    Fault("zero_input", Category.ZERO_INPUT, last_16_tokens),
    Fault("unmasked_store", Category.STRAY_WRITE, slot_15),
    Fault("signed_amax", Category.AMAX, negative_max_groups),
    Fault("extra_lane", Category.STRAY_WRITE, slot_zero),
    Fault("no_scale_store", Category.UNWRITTEN, scale_bytes_only),
]


_FAULT_RUNS: dict = {}  # (fault, spec changes) -> (spec, result, diagnosis): several tests read one run


def run_fault(f: Fault, **spec_changes):
    key = (f.name, tuple(sorted(spec_changes.items(), key=lambda kv: kv[0])))
    if key not in _FAULT_RUNS:
        spec = CacheSpec(**{**f.spec, **spec_changes})
        inputs_spec = spec.replace(num_blocks=f.input_blocks) if f.input_blocks else spec
        inputs = generate(inputs_spec, seed=0, slots=f.slots, distribution=f.distribution, inf_nan=f.inf_nan)
        _FAULT_RUNS[key] = (spec, *run_pair(spec, fault(f.name), inputs=inputs))
    return _FAULT_RUNS[key]


@pytest.mark.parametrize("f", FAULT_SUITE, ids=lambda f: f.name)
def test_planted_fault_is_the_only_cause_with_its_exact_byte_count(f):
    spec, result, found = run_fault(f)
    expected = f.expected(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert expected > 0
    assert found.top.category is f.category
    assert found.top.bytes == expected
    assert [c.category for c in found] == [f.category]  # one fault planted, one cause found
    assert found.bytes == result.diff.diff_bytes


@pytest.mark.parametrize("f", [f for f in FAULT_SUITE if f.name in (
    "integer_cast_wrap", "linear_layout", "other_format", "divisor_240", "skip_tokens", "ties_away")],
    ids=lambda f: f.name)
@pytest.mark.parametrize("changes", [
    {"head_dim": 256}, {"block_size": 16, "head_dim": 64, "quant_block_size": 32}, {"fp8": FP8Format.E4M3FNUZ},
], ids=["two-groups", "small-qbs", "fnuz"])
def test_planted_faults_are_found_on_other_geometries(f, changes):
    spec, result, found = run_fault(f, **changes)
    assert found.top.category is f.category
    assert found.top.bytes == f.expected(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)


def said(spec: CacheSpec, cause) -> tuple[str, str | None]:
    """(explanation, hint) as the reports word them."""
    return explain(cause, spec)


def test_linear_layout_names_the_order_found():
    spec, _, found = run_fault(FAULT_SUITE[2])
    assert found.top.facts == {"layout_found": "linear", "layout_expected": "shuffle"}
    assert "stored in linear order; the spec expects shuffle order" in said(spec, found.top)[0]


def test_shuffle_written_where_linear_is_expected_is_layout_too():
    spec = CacheSpec(layout=Layout.LINEAR)
    result, found = run_pair(spec, fault("linear_layout"))  # the fault writes the spec's other layout
    assert found.top.category is Category.LAYOUT
    assert found.top.facts["layout_found"] == "shuffle"
    assert "stored in shuffle order" in said(spec, found.top)[0]
    assert found.top.bytes == result.diff.diff_bytes


def test_layout_across_partially_filled_blocks():
    # sparse slots: odd blocks stay empty; within the even ones every moved byte is layout
    spec = CacheSpec(num_blocks=4)
    result, found = run_pair(spec, fault("linear_layout"), slots=SlotPattern.SPARSE)
    assert [c.category for c in found] == [Category.LAYOUT]
    assert found.top.blocks == (0, 2)


def test_integer_cast_names_both_conventions():
    spec, _, wrap = run_fault(FAULT_SUITE[0])
    _, _, nvidia = run_fault(FAULT_SUITE[1])
    assert wrap.top.facts["convention"] == "wrap" and nvidia.top.facts["convention"] == "nvidia"
    assert wrap.top.facts["negative_wrapped"] > wrap.top.facts["negative_to_zero"]
    assert nvidia.top.facts["negative_to_zero"] > nvidia.top.facts["negative_wrapped"]
    assert "negatives wrapped mod 256" in said(spec, wrap.top)[0]
    assert "negatives to 0" in said(spec, nvidia.top)[0]
    # each example byte is explained by the conversion it shows, computed here from its own quotient
    for found, rule in ((wrap, lambda y: math.trunc(y) % 256), (nvidia, lambda y: max(math.trunc(y), 0) % 256)):
        for example in found.top.examples:
            y, note = example.facts["quotient"], describe_example(Category.INTEGER_CAST, example)
            assert example.candidate_byte == rule(y)
            assert (note.endswith("gives 0 (NVIDIA's conversion)") if example.candidate_byte == 0 and y <= -1
                    else note.endswith(f"trunc {math.trunc(y)} = 0x{example.candidate_byte:02x} mod 256")), note
    assert "torch.float8_e4m3fn" in said(spec, wrap.top)[1]


def test_triton_buggy_is_diagnosed_integer_cast():
    spec = CacheSpec(num_blocks=1)
    result, found = run_pair(spec, "triton-buggy")
    assert found.top.category is Category.INTEGER_CAST
    assert found.top.bytes == result.diff.diff_bytes == count(value_region(spec, result.baseline.buffer)
                                                               != value_region(spec, result.candidate.buffer))
    assert "view the value region as torch.float8_e4m3fn before launching" in said(spec, found.top)[1]


def test_scale_ratio_names_the_ratio_and_the_divisors():
    spec, _, found = run_fault(FAULT_SUITE[4])
    assert found.top.facts["divisors"] == [448.0, 240.0]
    assert found.top.facts["ratio"] == pytest.approx(448 / 240, rel=1e-6)
    explanation, hint = said(spec, found.top)
    assert "1.86667x" in explanation
    assert "DIV 448 (e4m3fn's max) in the baseline against 240 (e4m3fnuz's max)" in hint


@pytest.mark.parametrize("scale_fmt", list(ScaleFormat))
def test_aiter_against_vllm_on_fnuz_names_240_against_224(scale_fmt):
    # SPEC.md section 3: aiter divides by 240 on e4m3fnuz, vLLM by 224; with ue8m0 the ratio shows as 2
    spec = CacheSpec(fp8=FP8Format.E4M3FNUZ, scale_fmt=scale_fmt)
    result, found = run_pair(spec, "reference-vllm")
    assert [c.category for c in found] == [Category.SCALE_RATIO]
    assert found.top.bytes == result.diff.diff_bytes
    assert found.top.facts["divisors"] == [240.0, 224.0]
    ratio = 240 / 224 if scale_fmt is ScaleFormat.FP32 else 2.0
    assert found.top.facts["ratio"] == pytest.approx(ratio, rel=1e-6)
    hint = said(spec, found.top)[1]
    assert "DIV 240 (e4m3fnuz's max) in the baseline against 224 (vLLM's e4m3fnuz divisor)" in hint
    assert "448" not in hint


def test_scale_pow2_says_the_ceil_flipped():
    spec, _, found = run_fault(FAULT_SUITE[5])
    assert found.top.facts["direction"] == "doubled"
    explanation, hint = said(spec, found.top)
    assert "the ceil flipped" in explanation and "tl.math.div_rn" in hint


def test_scale_ulp_reports_the_largest_ulp():
    spec, result, found = run_fault(FAULT_SUITE[6])
    a = scale_region(spec, result.baseline.buffer).contiguous().view(torch.int32).long()
    b = scale_region(spec, result.candidate.buffer).contiguous().view(torch.int32).long()
    assert found.top.facts == {"max_ulp": int((a - b).abs().max())}
    assert f"at most {found.top.facts['max_ulp']} ulp" in said(spec, found.top)[0]


def test_reciprocal_against_division_is_rounding_of_the_quotient():
    # fp32 scales: aiter's x * fl(1/s) and vLLM's x / s round differently on a few bytes (SPEC.md section 3)
    spec = CacheSpec(scale_fmt=ScaleFormat.FP32)
    result, found = run_pair(spec, "reference-vllm")
    assert [c.category for c in found] == [Category.ROUNDING]
    assert found.top.bytes == one_code_apart(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert found.top.facts["ties_to_even"] is None
    assert "fp32 quotients x/s differ in the last bit" in said(spec, found.top)[0]


def test_ties_away_from_zero_is_called_a_rounding_mode():
    spec, _, found = run_fault(FAULT_SUITE[7])
    assert found.top.facts["ties_to_even"] == "baseline"
    assert "at exact ties: the baseline rounds ties to even, the candidate does not" in said(spec, found.top)[0]


def test_unwritten_counts_whole_tokens():
    spec, _, found = run_fault(FAULT_SUITE[10])
    assert found.top.facts["tokens_never_written"] == 38  # 192 tokens, every fifth skipped
    assert "38 tokens never written at all" in said(spec, found.top)[0]


def test_stray_writes_say_where():
    spec, _, padding = run_fault(FAULT_SUITE[11])
    assert padding.top.facts["slot_bytes"] == 132 and padding.top.facts["guard_bytes"] == 0
    assert "132 in slots no token maps to" in said(spec, padding.top)[0]
    spec, _, found = run_fault(FAULT_SUITE[12])
    past = found.top
    assert past.facts["guard_bytes"] == 16
    assert "16 outside the cache (guard bytes)" in said(spec, past)[0]
    assert past.blocks == ()
    assert past.examples[0].coordinate is None and past.examples[0].guard_offset == 0
    assert past.examples[0].candidate_byte == 0x00
    assert past.examples[0].where() == "guard byte 0 past the end of the cache"


def random_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.copy_(torch.randint(0, 256, kv_cache.shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(1)))


def test_random_bytes_are_unknown_with_examples():
    spec = CacheSpec()
    inputs = generate(spec, seed=0)
    result = compare(spec, baseline=producers.resolve("reference"),
                     candidate=producers.Producer("random", "random bytes", random_writer), inputs=inputs, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert [c.category for c in found] == [Category.UNKNOWN]
    assert found.top.bytes == result.diff.diff_bytes
    assert len(found.top.examples) == EXAMPLES and said(spec, found.top)[1] is None


def test_hints_point_at_the_numerics_page_not_at_spec():
    anchors = {re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
               for line in (Path(__file__).parent.parent / "docs" / "NUMERICS.md").read_text().splitlines()
               if line.startswith("#")}
    cited = set()
    for f in FAULT_SUITE:
        spec, _, found = run_fault(f)
        for cause in found:
            text = " ".join(t for t in said(spec, cause) if t)
            assert "SPEC.md" not in text
            cited |= set(re.findall(r"docs/NUMERICS\.md#([a-z0-9-]+)", text))
    assert cited and cited <= anchors


# ---- identical caches, and nothing dropped -------------------------------------------------------------


@pytest.mark.parametrize("candidate, spec", [
    ("reference", CacheSpec()), ("reference-vllm", CacheSpec()),
    ("reference-vllm", CacheSpec(block_size=1, num_blocks=7)),
])
def test_identical_writers_have_no_diagnosis(candidate, spec):
    result, found = run_pair(spec, candidate)
    assert result.identical
    assert len(found) == 0 and found.top is None and found.to_json() == []


@settings(max_examples=25)
@given(seed=st.integers(0, 2**16), flips=st.integers(1, 400), span=st.integers(0, 6000),
       guard=st.integers(0, 2 * GUARD_ALIGN - 1),
       spec=st.sampled_from([CacheSpec(num_blocks=2), CacheSpec(num_blocks=2, scale_fmt=ScaleFormat.FP32),
                             CacheSpec(block_size=16, head_dim=64, quant_block_size=16, num_blocks=2),
                             CacheSpec(block_size=1, num_blocks=9, fp8=FP8Format.E4M3FNUZ),
                             CacheSpec(block_size=16, head_dim=32, quant_block_size=8, num_blocks=3),
                             CacheSpec(num_blocks=2, layout=Layout.INTERLEAVED, scale_fmt=ScaleFormat.UE8M0X4),
                             CacheSpec(block_size=4, head_dim=64, quant_block_size=32, num_blocks=3,
                                       layout=Layout.INTERLEAVED)]),
       slots=st.sampled_from(list(SlotPattern)))
def test_every_differing_byte_lands_in_exactly_one_cause(seed, flips, span, guard, spec, slots):
    # scattered byte flips (sparse units), one stretch of garbage (dense units) and a guard byte
    inputs = generate(spec, seed=seed, slots=slots, distribution=Distribution.MIXED, inf_nan=True)
    result, _ = run_pair(spec, "reference", inputs=inputs)
    base, cand = result.baseline.buffer, result.candidate.buffer
    g = torch.Generator().manual_seed(seed)
    where = torch.randint(0, cand.buffer.numel(), (flips,), generator=g)
    cand.buffer[where] ^= torch.randint(1, 256, (flips,), generator=g, dtype=torch.uint8)
    span = min(span, cand.buffer.numel() - 1)
    start = int(torch.randint(0, cand.buffer.numel() - span, (1,), generator=g))
    cand.buffer[start : start + span] = torch.randint(0, 256, (span,), generator=g, dtype=torch.uint8)
    cand.buffer[guard if guard < GUARD_ALIGN else -(guard - GUARD_ALIGN) - 1] ^= 0xFF  # every guard >= GUARD_ALIGN
    found = diagnose(spec, base, cand, inputs)
    assert found.bytes == count(base.buffer != cand.buffer)
    assert [c.bytes for c in found] == sorted((c.bytes for c in found), reverse=True)
    assert len({c.category for c in found}) == len(found)


def test_examples_show_the_bytes_at_their_coordinates():
    for f in FAULT_SUITE:
        spec, result, found = run_fault(f)
        for cause in found:
            for example in cause.examples:
                if example.coordinate is None:
                    continue
                c = example.coordinate
                index = c.block * spec.block_bytes + c.byte_in_block
                assert example.baseline_byte == int(result.baseline.buffer.flat.view(-1)[index])
                assert example.candidate_byte == int(result.candidate.buffer.flat.view(-1)[index])
                assert example.baseline_byte != example.candidate_byte


def test_diagnosis_is_json_ready():
    spec = CacheSpec()
    _, found = run_pair(spec, fault("no_saturation"), distribution=Distribution.TIES)
    payload = json.loads(json.dumps(diagnosis_json(found, spec)))
    first = payload[0]
    assert set(first) == {"category", "bytes", "blocks", "facts", "explanation", "hint", "examples"}
    assert first["category"] == "saturation-nan" and first["blocks"] == [0, 1, 2]
    assert first["facts"]["nan_side"] == "candidate"
    assert first["examples"][0]["candidate_value"] == "nan"  # NaN is not JSON: written as a string
    assert first["examples"][0]["note"].startswith("x = ")


# ---- the byte-pair tests, against their definitions --------------------------------------------------------


def test_poison_fill_splits_into_block_and_byte_parts():
    # The diagnosis adds a per-block and a per-byte part of the poison fill in uint8; that needs poison_at to
    # be linear in the position.
    block = torch.arange(0, 1 << 20, 4224).view(-1, 1)
    byte = torch.arange(4224).view(1, -1)
    split = poison_at(block) + poison_at(byte) - poison_at(torch.zeros_like(byte))
    assert torch.equal(split, poison_at(block + byte))


@pytest.mark.parametrize("fmt", list(FP8Format))
def test_one_code_apart_on_every_byte_pair(fmt):
    a, b = pairs.all_pairs()
    assert torch.equal(pairs.one_code_apart(a, b, fmt), fp8.code_distance(a, b, fmt) == 1)


@pytest.mark.parametrize("fmt", list(FP8Format))
def test_format_match_is_code_distance_at_most_one_in_the_other_format(fmt):
    other = FP8Format.E4M3FNUZ if fmt is FP8Format.E4M3FN else FP8Format.E4M3FN
    a, b = pairs.all_pairs()
    predicted = fp8.encode(torch.tensor(fp8.decode_table(fmt)), other)[a.long()]
    expected = (fp8.code_distance(b, predicted, other) <= 1) & (((a | b) & 0x7F) != 0)
    assert torch.equal(pairs.format_match(fmt, a, b), expected)
    assert torch.equal(pairs.pair_table(pairs.format_match, fmt), expected)


@pytest.mark.parametrize("y, byte", [(-1.0, 255), (-1.0, 0), (300.5, 44), (-0.3, 255), (-0.3, 0), (7.9, 7),
                                     (1000.0, 232), (500.0, 244), (300.0, 255)])
def test_integer_cast_accepts_every_platform_convention(y, byte):
    # SPEC.md section 5: NVIDIA truncates, zeroes negatives and wraps > 255; numpy wraps negatives; AMD floors
    base, cand = torch.tensor([0x40], dtype=torch.uint8), torch.tensor([byte], dtype=torch.uint8)
    assert bool(pairs.cast_match(torch.tensor([y]), base, cand)[0])
    assert bool(pairs.cast_match_fp32(torch.tensor([y]), base, cand)[0])


def test_integer_cast_is_not_evidence_from_a_zero():
    base, cand = torch.tensor([0x80], dtype=torch.uint8), torch.tensor([0x00], dtype=torch.uint8)
    assert not bool(pairs.cast_match(torch.tensor([-0.0]), base, cand)[0])


def test_fp32_integer_cast_agrees_with_the_float_one():
    # the fast int32 form against the trunc / remainder definition, over quotients of every magnitude
    g = torch.Generator().manual_seed(0)
    y = torch.cat([torch.randn(4096, generator=g) * 10.0 ** torch.randint(-3, 12, (4096,), generator=g),
                   torch.tensor([float("inf"), -float("inf"), float("nan"), 2.0**31, -2.0**31, 255.5, -0.5])])
    base = torch.randint(0, 256, y.shape, generator=g, dtype=torch.uint8)
    for cand in (torch.randint(0, 256, y.shape, generator=g, dtype=torch.uint8),
                 torch.remainder(torch.trunc(y.nan_to_num(0, 0, 0)), 256).to(torch.uint8)):
        slow, fast = pairs.cast_match(y, base, cand), pairs.cast_match_fp32(y, base, cand)
        assert torch.equal(slow[0], fast[0]) and torch.equal(slow[1], fast[1])


def test_block_ranges_render_compactly():
    from fp8check.report.terminal import block_ranges

    assert block_ranges((0, 1, 2, 5, 7, 8)) == "0-2, 5, 7-8 (6 blocks)"
    assert block_ranges((3,)) == "3"
    assert block_ranges(()) == "outside the cache"
    assert block_ranges(tuple(range(0, 40, 2)), limit=2) == "0, 2, ... (20 blocks)"


# ---- through the command line --------------------------------------------------------------------------


@pytest.mark.parametrize("name, options, category", [
    ("integer_cast_nvidia", (), "integer-cast"),
    ("linear_layout", (), "layout"),
    ("ties_away", ("--inputs", "ties"), "rounding"),
    ("approx_division", ("--inputs", "ue8m0-boundary"), "scale-pow2"),
    ("skip_tokens", ("--slots", "shuffled"), "unwritten"),
])
def test_cli_names_the_planted_cause_first(capsys, tmp_path, name, options, category):
    out_json = tmp_path / "result.json"
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", fault(name), *options,
                         "--json", str(out_json))
    assert code == 1, err
    assert "causes" in out
    lines = out.splitlines()
    below = lines[next(i for i, line in enumerate(lines) if line.strip() == "causes"):]
    first_row = next(line for line in below if line.startswith("│ "))
    assert first_row.split("│")[1].strip() == category
    payload = json.loads(out_json.read_text())
    assert payload["diagnosis"][0]["category"] == category
    assert sum(c["bytes"] for c in payload["diagnosis"]) == payload["diff_bytes"]
    assert [c["bytes"] for c in payload["diagnosis"]] == sorted((c["bytes"] for c in payload["diagnosis"]), reverse=True)


def test_cli_json_carries_typed_facts(capsys, tmp_path):
    out_json = tmp_path / "result.json"
    code, _, err = run(capsys, "compare", "--baseline", "reference", "--candidate", "reference-vllm", "--fp8",
                       "e4m3fnuz", "--scale-fmt", "fp32", "--json", str(out_json))
    assert code == 1, err
    cause = json.loads(out_json.read_text())["diagnosis"][0]
    assert cause["category"] == "scale-ratio" and cause["facts"]["divisors"] == [240.0, 224.0]
    assert "docs/NUMERICS.md#writer-numerics" in cause["hint"]


def test_cli_identical_has_no_cause_table(capsys, tmp_path):
    out_json = tmp_path / "result.json"
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", "reference-vllm",
                         "--json", str(out_json))
    assert code == 0, err
    assert "causes" not in out and "IDENTICAL" in out
    assert json.loads(out_json.read_text())["diagnosis"] == []


def test_cli_shows_hint_and_example(capsys):
    code, out, _ = run(capsys, "compare", "--baseline", "reference", "--candidate", fault("integer_cast_wrap"))
    assert code == 1
    flat = " ".join(line.strip("│ ") for line in out.splitlines())
    assert "fix: view the value region as" in flat
    assert "e.g. block 0, token 0, dim 0" in flat


def test_lost_bytes_are_an_internal_error_not_a_mismatch(capsys, monkeypatch):
    # a diagnosis that loses bytes is fp8check's own bug: exit 3, never a verdict about the writer
    from fp8check.diagnose import bytewise

    monkeypatch.setattr(bytewise, "byte_by_byte", lambda *args: [])
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", "reference-vllm",
                         "--scale-fmt", "fp32")
    assert code == 3
    assert "internal error: CheckerError: diagnosis accounts for 0 bytes but 7 differ" in err


# ---- words users can act on: each planted fault named for what it is ---------------------------------------


def fault_named(name: str) -> Fault:
    return next(f for f in FAULT_SUITE if f.name == name)


def test_ue8m0_floor_is_a_rounding_direction_not_a_divisor():
    spec, _, found = run_fault(fault_named("ue8m0_floor"))
    assert found.top.facts == {"groups": 192, "direction": "floor", "expected": "ceil"}  # 192 tokens, one group each
    explanation, hint = said(spec, found.top)
    assert "rounds log2(s) down (floor) where ue8m0 rounds it up (ceil)" in explanation
    assert "DIV" not in explanation + hint and "224" not in explanation + hint


def test_swapped_neighbour_scales_have_their_own_cause():
    spec, result, found = run_fault(fault_named("swapped_scales"))
    # tokens 0/1, 8/9, ...: 24 pairs in 192 tokens, both words of each pair differ
    assert found.top.facts == {"words": 48}
    assert "scales stored swapped between tokens" in said(spec, found.top)[0]


def test_one_overwritten_token_is_a_stray_write_not_a_divisor():
    spec, _, found = run_fault(fault_named("pads_to_slot_zero"))
    facts = found.top.facts
    assert facts["overwritten_slots"] == 1 and facts["overwritten_bytes"] == found.top.bytes and facts["slot_bytes"] == 0
    explanation, hint = said(spec, found.top)
    assert "1 slot of real tokens, overwritten by padding tokens" in explanation and "--pad-slot" in hint
    assert "DIV" not in explanation + hint
    owner = int(torch.nonzero(run_fault(fault_named("pads_to_slot_zero"))[1].inputs.slot_mapping == 0))
    note = describe_example(found.top.category, found.top.examples[0])
    assert f"token {owner} owns this slot; another row was written over it" in note


def test_amax_floor_names_the_floor_found():
    spec, _, found = run_fault(fault_named("amax_floor_1e6"))
    assert found.top.facts["floor_found"] == 1e-6 and found.top.facts["floor_bound"] == "exact"
    assert "a floor of 1e-06 (LMDeploy's)" in said(spec, found.top)[0]


def test_amax_floor_with_ue8m0_bounds_the_floor():
    spec, result, found = run_fault(fault_named("amax_floor_1e6"), scale_fmt=ScaleFormat.UE8M0)
    assert [c.category for c in found] == [Category.AMAX_FLOOR]
    assert found.top.bytes == tiny_amax_slots(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    low, high = found.top.facts["floor_found"] / 2, found.top.facts["floor_found"]
    assert low < 1e-6 <= high and found.top.facts["floor_bound"] == "range"
    assert f"a floor above {low:.2g} and at most {high:.2g}" in said(spec, found.top)[0]


def test_scales_one_ulp_apart_show_their_words():
    spec, result, found = run_fault(fault_named("scale_lastbit"))
    example = next(e for e in found.top.examples if e.coordinate.region.value == "scale")
    text = describe_example(found.top.category, example)
    base, cand = example.facts["baseline_scale"], example.facts["candidate_scale"]
    words = [example.facts["baseline_scale_word"], example.facts["candidate_scale_word"]]
    # the words as the cache holds them, read independently
    unit_word = result.baseline.buffer.flat[example.coordinate.block].view(-1)
    start = spec.scale_offset(example.coordinate.token, example.coordinate.group)
    assert words[0] == f"0x{int.from_bytes(bytes(unit_word[start:start + 4].tolist()), 'little'):08x}"
    assert f"{base:.9g} ({words[0]}) vs {cand:.9g} ({words[1]})" in text
    assert f"{abs(int(words[0], 16) - int(words[1], 16))} ulp" in text
    assert f"{base:g} vs {cand:g}" not in text


def test_ue8m0x4_scales_are_decoded():
    # four equal UE8M0 bytes per word (vLLM's mxfp8): 0x78787878 is 2^-7
    words = torch.tensor([[0x78] * 4, [0x7F] * 4, [0x78, 0x78, 0x78, 0x79]], dtype=torch.uint8)
    decoded = fp8.decode_scales(words, ScaleFormat.UE8M0X4)
    assert decoded[0] == 2.0**-7 and decoded[1] == 1.0 and torch.isnan(decoded[2])
    assert torch.equal(fp8.encode_scales(torch.tensor([2.0**-7, 1.0]), ScaleFormat.UE8M0X4), words[:2])


@pytest.mark.parametrize("spec_fmt, written", [(ScaleFormat.UE8M0, ScaleFormat.UE8M0X4),
                                               (ScaleFormat.UE8M0X4, ScaleFormat.UE8M0)])
def test_ue8m0x4_against_fp32_words_is_a_scale_format_not_unknown(spec_fmt, written):
    spec = CacheSpec(scale_fmt=spec_fmt)
    inputs = generate(spec, seed=0)
    result = compare(spec, baseline=producers.resolve("reference"), candidate=producers.Producer(
        "other-words", "the reference, its scales stored the other way",
        lambda k, kv, slots, qbs, fmt: producers.resolve("reference").writer(k, kv, slots, qbs, written.writer_arg)),
        inputs=inputs, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert [c.category for c in found] == [Category.SCALE_FORMAT]
    # 192 tokens, one word each: the bytes that differ between 0x3c000000-like words and 0x78787878-like ones
    assert found.top.bytes == count(scale_region(spec, result.baseline.buffer) != scale_region(spec, result.candidate.buffer))
    assert found.top.facts == {"words": 192, "format_found": written.value, "format_expected": spec_fmt.value}


def test_a_writer_that_ignores_ue8m0x4_and_writes_fp32_scales_is_named():
    # vLLM 0.33.0's ROCm writer and FlagGems know "ue8m0" only: given "ue8m0x4" they quantize with fp32 scales
    spec = CacheSpec(scale_fmt=ScaleFormat.UE8M0X4)
    inputs = generate(spec, seed=0)
    result = compare(spec, baseline=producers.resolve("reference"), candidate=producers.Producer(
        "ignores-ue8m0x4", "the reference with fp32 scales whatever it is asked",
        lambda k, kv, slots, qbs, fmt: producers.resolve("reference").writer(
            k, kv, slots, qbs, ScaleFormat.FP32.writer_arg)),
        inputs=inputs, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert [c.category for c in found] == [Category.SCALE_FORMAT]
    assert found.top.bytes == result.diff.diff_bytes  # its scales and the values they moved
    assert found.top.facts == {"words": 192, "format_found": "fp32", "format_expected": "ue8m0x4"}
    assert "the writer ignored --scale-fmt ue8m0x4" in said(spec, found.top)[0]
    # the example reads the candidate's word as what it holds: the fp32 scale of its group, never "nan"
    for example in found.top.examples:
        word = int(example.facts["candidate_scale_word"], 16)
        scale = torch.tensor([word], dtype=torch.int64).to(torch.int32).view(torch.float32).item()
        assert describe_example(Category.SCALE_FORMAT, example).endswith(f"is the fp32 scale {scale:g}")


def test_small_shares_keep_two_significant_digits():
    from fp8check.diagnose.words import percent

    assert percent(1, 25344) == "0.0039%" and percent(7, 25344) == "0.028%" and percent(0, 25344) == "0.0%"
    assert percent(25343, 25344) == ">99.9%" and percent(8138, 8192) == "99.3%"


def _token_1_written_over_token_0():
    """(spec, inputs, result, found) of a writer that writes every token, then token 1's row again over
    token 0's slot: a real token's slot overwritten by another real token's row (no padding involved)."""
    spec = CacheSpec()
    inputs = generate(spec, seed=0)

    def copies_token_1_over_token_0(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        reference = producers.resolve("reference").writer
        reference(k, kv_cache, slot_mapping, quant_block_size, scale_fmt)
        reference(k[1:2], kv_cache, slot_mapping[:1], quant_block_size, scale_fmt)

    result = compare(spec, baseline=producers.resolve("reference"),
                     candidate=producers.Producer("overwrite", "token 1 over token 0", copies_token_1_over_token_0),
                     inputs=inputs, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    return spec, inputs, result, found


def test_one_group_with_another_scale_is_no_divisor_claim():
    # one group's scale against another's says nothing about DIV
    spec, inputs, result, found = _token_1_written_over_token_0()
    assert found.bytes == result.diff.diff_bytes == count(rows_of_slots(spec, result.baseline.buffer,
                                                                        inputs.slot_mapping[:1])
                                                          != rows_of_slots(spec, result.candidate.buffer,
                                                                           inputs.slot_mapping[:1]))
    assert Category.SCALE_RATIO not in found.by_category()
    assert all("DIV" not in " ".join(t for t in said(spec, c) if t) for c in found)


# ---- the bugs people write: right bytes at the wrong place, the wrong amax ------------------------------


def test_slot_shift_is_a_shift_by_one_slot_with_the_slot_hint():
    spec, _, found = run_fault(fault_named("slot_shift"))
    assert found.top.facts == {"moved": "rows", "by": "slots", "offset": 1, "units_moved_in": 191}
    explanation, hint = said(spec, found.top)
    assert "stored 1 slot further on: slot s holds what belongs at slot s-1" in explanation
    assert "slot index" in hint


def test_scale_only_shift_is_no_swap():
    spec, _, found = run_fault(fault_named("scale_shift"), scale_fmt=ScaleFormat.FP32)
    assert [c.category for c in found] == [Category.SHIFT]
    assert found.top.facts["moved"] == "scales" and found.top.facts["offset"] == 1
    assert "scale store" in said(spec, found.top)[1]


def test_transposed_tile_is_named_transposed_with_no_unwritten_bytes():
    spec, result, found = run_fault(fault_named("transposed_tile"))
    assert found.top.facts == {"permutation": "transposed", "moved_positions": 240}
    assert "transposed (token and dim exchanged)" in said(spec, found.top)[0]
    # some moved values equal the poison fill of their new place: still the permutation's bytes
    poison_like = count(value_region(spec, result.candidate.buffer)
                        == poison_at(torch.arange(result.candidate.buffer.flat.numel()).view(spec.num_blocks, -1)
                                     + result.candidate.buffer.guard_bytes)[:, : spec.value_bytes])
    assert poison_like > 0 and Category.UNWRITTEN not in found.by_category()


def test_value_bytes_moved_across_tiles_name_the_positions_and_the_offset_terms():
    spec, _, found = run_fault(fault_named("reversed_dim_tiles"))
    # every position of a block takes its code from another tile of the same block
    facts = {"permutation": "moved", "moved_positions": spec.value_bytes, "from_neighbour": 0}
    assert found.top.facts == facts
    explanation, hint = said(spec, found.top)
    assert "the same way in every block" in explanation and "the value store's offset" in hint


@pytest.mark.parametrize("scale_fmt", [ScaleFormat.UE8M0, ScaleFormat.FP32])
def test_groups_read_as_zeros_point_at_the_load_of_k(scale_fmt):
    spec, _, found = run_fault(fault_named("zero_input"), scale_fmt=scale_fmt)
    assert [c.category for c in found] == [Category.ZERO_INPUT]
    assert found.top.facts == {"groups": 16 * spec.groups_per_token}
    assert "the load of k" in said(spec, found.top)[1]
    # an example byte is the code of 0 where x is not: no quotient of the zeroed group's floor scale is shown
    values = [e for e in found.top.examples if e.coordinate.region is Region.VALUE and e.facts.get("x")]
    assert values
    for example in values:
        note = describe_example(Category.ZERO_INPUT, example)
        assert example.candidate_byte == 0 and "x/s" not in note
        assert note.endswith(f"x = {example.facts['x']:g}, written as the code of 0 (its group was quantized from zeros)")


@pytest.mark.parametrize("scale_fmt", [ScaleFormat.UE8M0, ScaleFormat.FP32])
def test_signed_amax_points_at_the_abs_not_a_divisor(scale_fmt):
    spec = CacheSpec(scale_fmt=scale_fmt)
    result, found = run_pair(spec, fault("signed_amax"), baseline="triton")
    assert [c.category for c in found] == [Category.AMAX]
    assert found.top.bytes == negative_max_groups(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert found.top.facts["amax"] == "max(x)" and found.top.facts["divisor"] == 448.0
    explanation, hint = said(spec, found.top)
    assert "max(x), the signed maximum" in explanation and "tl.abs" in hint
    assert "224" not in explanation + hint


def test_a_lane_past_the_last_token_is_a_stray_row_with_the_mask_hint():
    spec, _, found = run_fault(fault_named("extra_lane"))
    assert found.top.facts["foreign_slots"] == 1 and found.top.facts["foreign_bytes"] == found.top.bytes
    explanation, hint = said(spec, found.top)
    assert "overwritten by a row no token has" in explanation and "token < num_tokens" in hint
    assert "FP8" not in hint


def test_a_lane_with_no_token_writing_part_of_a_row_is_a_stray_write():
    spec, _, found = run_fault(fault_named("unmasked_store"))
    assert found.top.facts["foreign_slots"] == 1 and found.top.facts["foreign_bytes"] == found.top.bytes
    assert "the stores' masks" in said(spec, found.top)[1]


def test_another_tokens_row_over_a_slot_is_named_a_copy():
    spec, _, result, found = _token_1_written_over_token_0()
    assert [c.category for c in found] == [Category.STRAY_WRITE]
    assert found.top.facts["copied_slots"] == 1 and found.top.facts["copied_bytes"] == result.diff.diff_bytes
    assert "another token's row" in said(spec, found.top)[0]


def test_a_dropped_scale_store_points_at_the_scale_store():
    spec, _, found = run_fault(fault_named("no_scale_store"))
    assert found.top.facts["scale_words_unwritten"] == 192 and found.top.facts["value_groups_unwritten"] == 0
    explanation, hint = said(spec, found.top)
    assert "192 scale words whose values it wrote" in explanation and "scale store" in hint


def test_tokens_never_written_point_at_the_grid():
    spec, _, found = run_fault(fault_named("skip_tokens"))
    assert found.top.facts["value_groups_unwritten"] == found.top.facts["scale_words_unwritten"] == 38
    assert "grid covers all tokens" in said(spec, found.top)[1]


@pytest.mark.parametrize("spec_fmt, direction", [(ScaleFormat.UE8M0, "none"), (ScaleFormat.FP32, "ceil")])
def test_an_inverted_ue8m0_flag_is_a_rounding_cause_with_the_flag_hint(spec_fmt, direction):
    spec = CacheSpec(scale_fmt=spec_fmt)
    inputs = generate(spec, seed=0)
    other = ScaleFormat.FP32 if spec_fmt is ScaleFormat.UE8M0 else ScaleFormat.UE8M0

    def inverted(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        producers.resolve("reference").writer(k, kv_cache, slot_mapping, quant_block_size, other.writer_arg)

    result = compare(spec, baseline=producers.resolve("reference"),
                     candidate=producers.Producer("inverted", "the other rounding", inverted), inputs=inputs, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert [c.category for c in found] == [Category.UE8M0_ROUNDING]
    assert found.top.bytes == result.diff.diff_bytes and found.top.facts["direction"] == direction
    assert "check the flag that selects it" in said(spec, found.top)[1]


def test_a_value_shift_beside_a_wrong_scale_keeps_every_byte():
    # values stored one slot early, and one token's scale doubled as well: the move takes the value rows of
    # units whose scale is right, and nothing of the others is lost
    spec = CacheSpec()
    inputs = generate(spec, seed=0)

    def values_early(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        reference = producers.resolve("reference").writer
        moved = kv_cache.clone()
        reference(k, kv_cache, slot_mapping, quant_block_size, scale_fmt)
        reference(k, moved, torch.where(slot_mapping > 0, slot_mapping - 1, -1), quant_block_size, scale_fmt)
        blocks, moved_blocks = kv_cache.view(spec.num_blocks, -1), moved.view(spec.num_blocks, -1)
        blocks[:, : spec.value_bytes] = moved_blocks[:, : spec.value_bytes]
        word = blocks[0, spec.scale_offset(5, 0): spec.scale_offset(5, 0) + 4].view(torch.float32)
        word *= 2

    result = compare(spec, baseline=producers.resolve("reference"),
                     candidate=producers.Producer("early", "values one slot early", values_early), inputs=inputs,
                     device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert found.bytes == result.diff.diff_bytes
    assert found.top.category is Category.SHIFT and found.top.facts["moved"] == "values"
    assert found.top.facts["offset"] == -1


@pytest.mark.parametrize("values, computed", [(lambda x, s: x * s, "x * s"), (lambda x, s: x, "x"),
                                              (lambda x, s: torch.full_like(x, -448.0), "-max")])
def test_values_of_another_quotient_name_it(values, computed):
    # the scales are right; the value bytes are the FP8 codes of x * s, of x, or of -max everywhere
    spec = CacheSpec()
    inputs = generate(spec, seed=0)

    def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        from fp8check.core.cache import scatter_rows
        from fp8check.core.reference import AITER, quantize

        codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt,
                                 quant_block_size=quant_block_size)
        wrong = fp8.encode(values(k.float(), scales.view(-1, 1)), spec.fp8)
        scatter_rows(spec, kv_cache, slot_mapping, wrong, scales)

    result = compare(spec, baseline=producers.resolve("reference"),
                     candidate=producers.Producer("quotient", "another quotient", writer), inputs=inputs, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert found.top.category is Category.QUOTIENT and found.top.facts["computed"] == computed
    assert found.top.bytes == result.diff.diff_bytes


def test_a_divisor_that_multiplies_is_named_with_the_operator_hint():
    spec = CacheSpec()
    inputs = generate(spec, seed=0)

    def multiplies(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        from fp8check.core.cache import scatter_rows

        x = k.float().view(k.shape[0], -1, quant_block_size)
        s = x.abs().amax(dim=-1).clamp(min=1e-4) * 448.0  # the fault: * DIV
        s = torch.exp2(torch.ceil(torch.log2(s)))
        codes = fp8.encode(x / s.unsqueeze(-1), spec.fp8).view(k.shape[0], -1)
        scatter_rows(spec, kv_cache, slot_mapping, codes, s)

    result = compare(spec, baseline=producers.resolve("reference"),
                     candidate=producers.Producer("multiplies", "s = amax * DIV", multiplies), inputs=inputs, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert [c.category for c in found] == [Category.AMAX] and found.top.bytes == result.diff.diff_bytes
    assert found.top.facts["amax"] == "max(|x|) * DIV" and found.top.facts["words"] == 192
    assert "the divisor multiplies" in said(spec, found.top)[0] and "operator" in said(spec, found.top)[1]


def test_swapped_words_over_values_they_do_not_explain_are_no_swap():
    # the scale words of tokens 0/1, 8/9, ... exchanged as in swapped_scales, but those tokens' values are
    # random bytes: the words coincide, they do not explain the values, so no scale-swap is claimed
    spec = CacheSpec(scale_fmt=ScaleFormat.FP32)
    inputs = generate(spec, seed=0)

    def garbage_under_swapped_words(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        producers.resolve(f"file:{FAULTS / 'swapped_scales.py'}:writer", isolation=None).writer(
            k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=spec.fp8.torch_dtype(),
            layout=spec.layout.value)
        rows = torch.arange(0, k.shape[0] - 1, 8)
        slots = torch.cat([slot_mapping[rows], slot_mapping[rows + 1]])
        noise = torch.randint(0, 256, (slots.numel(), spec.head_dim), generator=torch.Generator().manual_seed(1),
                              dtype=torch.uint8)
        index = spec.value_index(kv_cache.device)[slots % spec.block_size] + (slots // spec.block_size).view(-1, 1) * spec.block_bytes
        kv_cache.view(-1)[index] = noise

    result = compare(spec, baseline=producers.resolve("reference"),
                     candidate=producers.Producer("noise", "swapped words, random values", garbage_under_swapped_words),
                     inputs=inputs, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert found.bytes == result.diff.diff_bytes
    assert Category.SCALE_SWAP not in found.by_category()
