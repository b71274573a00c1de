"""Why bytes differ: every planted fault is named first with its exact byte count, nothing is dropped,
identical caches have no causes, and the CLI shows and writes the diagnosis."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fp8check import diagnose as dg
from fp8check import fp8
from fp8check.writers import registry as producers
from fp8check.cache import GUARD_ALIGN, CacheBuffer, poison
from fp8check.cli import main
from fp8check.compare import compare
from fp8check.diagnose import Category, diagnose
from fp8check.inputs import Distribution, SlotPattern, generate
from fp8check.spec import CacheSpec, FP8Format, Layout, ScaleFormat

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


def last_block(spec, base, cand, inputs) -> int:
    assert not bool((inputs.slot_mapping // spec.block_size == spec.num_blocks - 1).any()), "no token maps there"
    return count(base.flat[-1] != cand.flat[-1])


def guard_bytes(spec, base, cand, inputs) -> int:
    return count(base.guards != cand.guards)


@dataclass(frozen=True)
class Fault:
    name: str
    category: Category
    expected: object  # (spec, baseline, candidate, inputs) -> int
    spec: dict = field(default_factory=dict)
    distribution: Distribution = Distribution.NORMAL
    slots: SlotPattern = SlotPattern.SEQUENTIAL
    input_blocks: int | None = None  # generate inputs for fewer blocks than the cache has


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
]


def run_fault(f: Fault, **spec_changes):
    spec = CacheSpec(**{**f.spec, **spec_changes})
    inputs_spec = spec.replace(num_blocks=f.input_blocks) if f.input_blocks else spec
    inputs = generate(inputs_spec, seed=0, slots=f.slots, distribution=f.distribution)
    result, found = run_pair(spec, fault(f.name), inputs=inputs)
    return spec, result, found


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


def test_linear_layout_names_the_order_found():
    _, _, found = run_fault(FAULT_SUITE[2])
    assert "stored in linear order; the spec expects shuffle order" in found.top.explanation


def test_shuffle_written_where_linear_is_expected_is_layout_too():
    spec = CacheSpec(layout=Layout.LINEAR)
    result, found = run_pair(spec, fault("linear_layout"))  # the fault writes the spec's other layout
    assert found.top.category is Category.LAYOUT
    assert "stored in shuffle order" in found.top.explanation
    assert found.top.bytes == result.diff.diff_bytes


def test_layout_across_partially_filled_blocks():
    # sparse slots: odd blocks stay empty; within the even ones every moved byte is layout
    spec = CacheSpec(num_blocks=4)
    result, found = run_pair(spec, fault("linear_layout"), slots=SlotPattern.SPARSE)
    assert [c.category for c in found] == [Category.LAYOUT]
    assert found.top.blocks == (0, 2)


def test_integer_cast_names_both_conventions():
    wrap = run_fault(FAULT_SUITE[0])[2].top
    nvidia = run_fault(FAULT_SUITE[1])[2].top
    assert "negatives wrapped mod 256" in wrap.explanation
    assert "negatives to 0" in nvidia.explanation
    assert "torch.float8_e4m3fn" in wrap.hint


def test_triton_buggy_is_diagnosed_integer_cast():
    spec = CacheSpec(num_blocks=1)
    result, found = run_pair(spec, "triton-buggy")
    assert found.top.category is Category.INTEGER_CAST
    assert found.top.bytes == result.diff.diff_bytes == count(value_region(spec, result.baseline.buffer)
                                                               != value_region(spec, result.candidate.buffer))
    assert "view the value region as torch.float8_e4m3fn before launching" in found.top.hint


def test_scale_ratio_names_the_ratio_and_the_divisors():
    cause = run_fault(FAULT_SUITE[4])[2].top
    assert "1.86667x" in cause.explanation
    assert "DIV 448 (e4m3fn's max) in the baseline against 240 (e4m3fnuz's max)" in cause.hint


def test_aiter_against_vllm_on_fnuz_is_a_scale_ratio_of_240_over_224():
    spec = CacheSpec(fp8=FP8Format.E4M3FNUZ, scale_fmt=ScaleFormat.FP32)
    result, found = run_pair(spec, "reference-vllm")
    assert [c.category for c in found] == [Category.SCALE_RATIO]
    assert "1.07143x" in found.top.explanation and "DIV 240" in found.top.hint and "224" in found.top.hint
    assert found.top.bytes == result.diff.diff_bytes


def test_scale_pow2_says_the_ceil_flipped():
    cause = run_fault(FAULT_SUITE[5])[2].top
    assert "the ceil flipped" in cause.explanation and "tl.math.div_rn" in cause.hint


def test_reciprocal_against_division_is_rounding_of_the_quotient():
    # fp32 scales: aiter's x * fl(1/s) and vLLM's x / s round differently on a few bytes (SPEC.md section 3)
    spec = CacheSpec(scale_fmt=ScaleFormat.FP32)
    result, found = run_pair(spec, "reference-vllm")
    assert [c.category for c in found] == [Category.ROUNDING]
    assert found.top.bytes == one_code_apart(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    assert "fp32 quotients x/s differ in the last bit" in found.top.explanation


def test_ties_away_from_zero_is_called_a_rounding_mode():
    cause = run_fault(FAULT_SUITE[7])[2].top
    assert "at exact ties: the baseline rounds ties to even, the candidate does not" in cause.explanation


def test_unwritten_counts_whole_tokens():
    cause = run_fault(FAULT_SUITE[10])[2].top
    assert "38 tokens never written at all" in cause.explanation  # 192 tokens, every fifth skipped


def test_stray_writes_say_where():
    assert "132 in slots no token maps to" in run_fault(FAULT_SUITE[11])[2].top.explanation
    past = run_fault(FAULT_SUITE[12])[2].top
    assert "16 outside the cache (guard bytes)" in past.explanation
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
    assert len(found.top.examples) == dg.EXAMPLES and found.top.hint is None


# ---- identical caches, and nothing dropped -------------------------------------------------------------


@pytest.mark.parametrize("candidate, spec", [
    ("reference", CacheSpec()), ("reference-vllm", CacheSpec()),
    ("reference-vllm", CacheSpec(block_size=1, num_blocks=7)),
])
def test_identical_writers_have_no_diagnosis(candidate, spec):
    result, found = run_pair(spec, candidate)
    assert result.identical
    assert len(found) == 0 and found.top is None and found.to_json() == []


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), flips=st.integers(1, 400), span=st.integers(0, 6000),
       guard=st.integers(0, 2 * GUARD_ALIGN - 1),
       spec=st.sampled_from([CacheSpec(num_blocks=2), CacheSpec(num_blocks=2, scale_fmt=ScaleFormat.FP32),
                             CacheSpec(block_size=16, head_dim=64, quant_block_size=16, num_blocks=2),
                             CacheSpec(block_size=1, num_blocks=9, fp8=FP8Format.E4M3FNUZ)]),
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
    payload = json.loads(json.dumps(found.to_json()))
    first = payload[0]
    assert set(first) == {"category", "bytes", "blocks", "explanation", "hint", "examples"}
    assert first["category"] == "saturation-nan" and first["blocks"] == [0, 1, 2]
    assert first["examples"][0]["candidate_value"] == "nan"  # NaN is not JSON: written as a string


# ---- the vectorized helpers match their definitions --------------------------------------------------------


@pytest.mark.parametrize("layout", list(Layout))
def test_logical_view_is_the_spec_byte_math(layout):
    spec = CacheSpec(num_blocks=2, block_size=32, head_dim=64, quant_block_size=64, layout=layout)
    values = torch.randint(0, 256, (2, spec.value_bytes), dtype=torch.uint8)
    expected = values[:, spec.value_index().view(-1)].view(2, spec.block_size, spec.head_dim)
    assert torch.equal(dg.logical(spec, values, layout), expected)


def test_poison_fill_splits_into_block_and_byte_parts():
    # The diagnosis computes poison as (block part + byte part) % 256; that needs poison to be linear.
    from fp8check.cache import POISON_OFFSET, POISON_STEP

    position = torch.arange(1 << 16)
    block, byte = position // 4224 * 4224, position % 4224
    split = ((block * POISON_STEP + POISON_OFFSET) % 256 + (byte * POISON_STEP) % 256) % 256
    assert torch.equal(split.to(torch.uint8), poison(1 << 16))


def test_count_rows_matches_count_nonzero():
    mask = torch.rand(100, 128) < 0.3
    assert torch.equal(dg.count_rows(mask), torch.count_nonzero(mask, dim=1))
    odd = torch.rand(7, 12) < 0.5
    assert torch.equal(dg.count_rows(odd), torch.count_nonzero(odd, dim=1))


@pytest.mark.parametrize("fmt", list(FP8Format))
def test_one_code_apart_on_every_byte_pair(fmt):
    a = torch.arange(256, dtype=torch.uint8).repeat_interleave(256)
    b = torch.arange(256, dtype=torch.uint8).repeat(256)
    assert torch.equal(dg._one_code_apart(a, b, fmt), fp8.code_distance(a, b, fmt) == 1)


@pytest.mark.parametrize("y, byte", [(-1.0, 255), (-1.0, 0), (300.5, 44), (-0.3, 255), (-0.3, 0), (7.9, 7),
                                     (1000.0, 232), (500.0, 244), (300.0, 255)])
def test_integer_cast_accepts_every_platform_convention(y, byte):
    match, _ = dg._cast_match(torch.tensor([y]), torch.tensor([0x40], dtype=torch.uint8),
                              torch.tensor([byte], dtype=torch.uint8))
    assert bool(match)


def test_integer_cast_is_not_evidence_from_a_zero():
    match, _ = dg._cast_match(torch.tensor([-0.0]), torch.tensor([0x80], dtype=torch.uint8),
                              torch.tensor([0x00], dtype=torch.uint8))
    assert not bool(match)


def test_format_match_reads_the_other_format():
    base = fp8.encode(torch.tensor([1.0, -13.0, 448.0, 0.0]), FP8Format.E4M3FN)
    cand = fp8.encode(torch.tensor([1.0, -13.0, 240.0, 0.0]), FP8Format.E4M3FNUZ)  # 448 saturates to 240
    assert dg._format_match(FP8Format.E4M3FN, base, cand).tolist() == [True, True, True, False]


def test_block_ranges_render_compactly():
    from fp8check.report.terminal import block_ranges

    assert block_ranges((0, 1, 2, 5, 7, 8)) == "0-2, 5, 7-8 (6 blocks)"
    assert block_ranges((3,)) == "3"
    assert block_ranges(()) == "outside the cache"
    assert block_ranges(tuple(range(0, 40, 2)), limit=2) == "0, 2, ... (20 blocks)"


# ---- through the command line --------------------------------------------------------------------------


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name, options, category", [
    ("integer_cast_nvidia", (), "integer-cast"),
    ("linear_layout", (), "layout"),
    ("ties_away", ("--inputs", "ties"), "rounding"),
    ("approx_division", ("--inputs", "ue8m0-boundary"), "scale-pow2"),
    ("skip_tokens", ("--slots", "shuffled"), "unwritten"),
])
def test_cli_names_the_planted_cause_first(capsys, tmp_path, name, options, category):
    out_json = tmp_path / "result.json"
    code, out, err = run_cli(capsys, "compare", "--baseline", "reference", "--candidate", fault(name), *options,
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


def test_cli_identical_has_no_cause_table(capsys, tmp_path):
    out_json = tmp_path / "result.json"
    code, out, err = run_cli(capsys, "compare", "--baseline", "reference", "--candidate", "reference-vllm",
                             "--json", str(out_json))
    assert code == 0, err
    assert "causes" not in out and "IDENTICAL" in out
    assert json.loads(out_json.read_text())["diagnosis"] == []


def test_cli_shows_hint_and_example(capsys):
    code, out, _ = run_cli(capsys, "compare", "--baseline", "reference", "--candidate", fault("integer_cast_wrap"))
    assert code == 1
    flat = " ".join(line.strip("│ ") for line in out.splitlines())
    assert "fix: view the value region as" in flat
    assert "e.g. block 0, token 0, dim 0" in flat


def test_lost_bytes_are_an_internal_error_not_a_mismatch(capsys, monkeypatch):
    # a diagnosis that loses bytes is fp8check's own bug: exit 3, never a verdict about the writer
    monkeypatch.setattr(dg, "_byte_by_byte", lambda *args: None)
    code, out, err = run_cli(capsys, "compare", "--baseline", "reference", "--candidate", "reference-vllm",
                             "--scale-fmt", "fp32")
    assert code == 3
    assert "internal error: DiagnosisError: diagnosis accounts for 0 bytes but 7 differ" in err


@pytest.mark.parametrize("fmt", list(FP8Format))
def test_format_match_is_code_distance_at_most_one_in_the_other_format(fmt):
    other = FP8Format.E4M3FNUZ if fmt is FP8Format.E4M3FN else FP8Format.E4M3FN
    a = torch.arange(256, dtype=torch.uint8).repeat_interleave(256)
    b = torch.arange(256, dtype=torch.uint8).repeat(256)
    predicted = fp8.encode(torch.tensor(fp8.decode_table(fmt)), other)[a.long()]
    expected = (fp8.code_distance(b, predicted, other) <= 1) & (((a | b) & 0x7F) != 0)
    assert torch.equal(dg._format_match(fmt, a, b), expected)
