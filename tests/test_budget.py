"""Budgets: 0 is exact; a budget excuses close value codes, allows a number or a fraction of bytes, and the
verdict names the budget exceeded. Within budget exits 0."""

from __future__ import annotations

import json

import pytest
import torch

from fp8check.core import fp8
from fp8check.producers import registry as producers
from fp8check.core.budget import MAX_CODE_DISTANCE, Budget, BudgetError, check
from fp8check.cli import main
from fp8check.run.compare import compare
from fp8check.core.inputs import generate
from fp8check.core.spec import CacheSpec, FP8Format, ScaleFormat
from conftest import run

CPU = torch.device("cpu")
FP32 = CacheSpec(scale_fmt=ScaleFormat.FP32)  # aiter vs vLLM: 7 value bytes one code apart, scales equal
FNUZ = CacheSpec(fp8=FP8Format.E4M3FNUZ, scale_fmt=ScaleFormat.FP32)  # DIV 240 vs 224: scales differ too


def references(spec: CacheSpec):
    return compare(spec, baseline=producers.resolve("reference"), candidate=producers.resolve("reference-vllm"),
                   inputs=generate(spec, seed=0), device=CPU)


def decide(result, **budget):
    return check(Budget(**budget), result.diff, result.baseline.buffer, result.candidate.buffer)


@pytest.mark.parametrize("fmt", list(FP8Format))
def test_code_distance_is_the_rank_difference_of_decoded_values_on_every_pair(fmt):
    """An oracle independent of the bit arithmetic: rank every code's value among the format's distinct
    finite values (+0 and -0 are one value); NaN is NAN_DISTANCE from a number and 0 from a NaN."""
    values = torch.tensor(fp8.decode_table(fmt), dtype=torch.float64)
    finite = torch.unique(values[~values.isnan()])  # sorted; -0.0 == 0.0 collapse
    rank = torch.searchsorted(finite, values.nan_to_num(0.0))
    a = torch.arange(256, dtype=torch.uint8).repeat_interleave(256)
    b = torch.arange(256, dtype=torch.uint8).repeat(256)
    expected = (rank[a.long()] - rank[b.long()]).abs()
    nan_a, nan_b = values[a.long()].isnan(), values[b.long()].isnan()
    expected = torch.where(nan_a ^ nan_b, fp8.NAN_DISTANCE, torch.where(nan_a & nan_b, 0, expected))
    assert torch.equal(fp8.code_distance(a, b, fmt).long(), expected)


def test_default_budget_is_exact():
    result = references(FP32)
    assert Budget().exact
    verdict = decide(result)
    assert not verdict.within and verdict.counted == 7 and verdict.allowed == 0
    assert verdict.worst_distance is None  # distances are only measured when a budget asks for them


def test_identical_is_within_every_budget():
    verdict = decide(references(CacheSpec()))
    assert verdict.within and verdict.counted == 0 and verdict.failed == ()


def test_code_distance_excuses_one_code_apart():
    verdict = decide(references(FP32), max_code_distance=1)
    assert verdict.within
    assert (verdict.excused, verdict.counted, verdict.worst_distance) == (7, 0, 1)


@pytest.mark.parametrize("allowed, within", [(6, False), (7, True), (100, True)])
def test_max_diff_bytes(allowed, within):
    verdict = decide(references(FP32), max_diff_bytes=allowed)
    assert verdict.within is within
    assert verdict.failed == (() if within else ("max-diff-bytes",))  # only the budget that was set


def test_max_diff_fraction_is_of_the_cache_bytes():
    # 7 of 25344 bytes: 7 / 25344 = 0.000276
    assert decide(references(FP32), max_diff_fraction=0.0003).within
    verdict = decide(references(FP32), max_diff_fraction=0.0002)
    assert not verdict.within and verdict.allowed == 5


def test_the_larger_allowance_wins():
    assert decide(references(FP32), max_diff_bytes=3, max_diff_fraction=0.0003).within


def test_scale_bytes_are_never_excused_by_code_distance():
    result = references(FNUZ)
    scale_bytes = sum(b.scale_diff for b in result.diff.all_rows())
    verdict = decide(result, max_code_distance=MAX_CODE_DISTANCE)
    assert scale_bytes > 0 and verdict.counted == scale_bytes
    assert verdict.failed == ("max-code-distance",)  # the only budget set


def test_far_codes_name_the_code_distance_budget():
    verdict = decide(references(FNUZ), max_code_distance=1)
    assert not verdict.within and verdict.worst_distance > 1
    assert verdict.failed[0] == "max-code-distance"


@pytest.mark.parametrize("budget, option", [
    ({"max_diff_bytes": -1}, "--max-diff-bytes"), ({"max_diff_fraction": 1.5}, "--max-diff-fraction"),
    ({"max_code_distance": -2}, "--max-code-distance"),
])
def test_impossible_budgets_are_refused(budget, option):
    with pytest.raises(BudgetError, match=option):
        Budget(**budget)


# ---- through the command line --------------------------------------------------------------------------


REFERENCES = ("compare", "--baseline", "reference", "--candidate", "reference-vllm", "--scale-fmt", "fp32")


def test_cli_within_budget_exits_0(capsys, tmp_path):
    out_json = tmp_path / "r.json"
    code, out, err = run(capsys, *REFERENCES, "--max-code-distance", "1", "--json", str(out_json))
    assert code == 0, err
    assert "PASS within budget: 7 of 25344 bytes differ (max code distance 1 <= 1)" in " ".join(out.split())
    assert "DIFFERENT" not in out  # one verdict line
    budget = json.loads(out_json.read_text())["budget"]
    assert budget["within"] is True and budget["excused"] == 7 and budget["failed"] == []


def test_cli_over_budget_names_the_budget(capsys):
    code, out, err = run(capsys, *REFERENCES, "--max-diff-bytes", "3")
    assert code == 1, err
    assert "FAIL over budget: 7 of 25344 bytes differ (exceeds 7 counted > 3 allowed by --max-diff-bytes 3)" in \
        " ".join(out.split())
    assert "fraction" not in out  # only the budget that was set and failed is named


def test_cli_over_the_fraction_names_only_the_fraction(capsys):
    code, out, err = run(capsys, *REFERENCES, "--max-diff-fraction", "0.0002")
    assert code == 1, err
    assert "(exceeds 7 counted > 5 allowed by --max-diff-fraction 0.0002)" in " ".join(out.split())
    assert "--max-diff-bytes" not in out


def test_cli_over_the_code_distance_names_only_it(capsys):
    code, out, err = run(capsys, *REFERENCES, "--fp8", "e4m3fnuz", "--max-code-distance", "1")
    assert code == 1, err
    flat = " ".join(out.split())
    assert "FAIL over budget:" in flat and "(exceeds max code distance " in flat and "--max-diff" not in flat


def test_cli_exact_verdict_is_unchanged(capsys):
    code, out, _ = run(capsys, *REFERENCES)
    assert code == 1
    assert "BUDGET" not in out and "DIFFERENT: 7 of 25344 bytes differ" in out


@pytest.mark.parametrize("option, value", [("--max-diff-bytes", "-1"), ("--max-diff-fraction", "2"),
                                           ("--max-code-distance", "x")])
def test_cli_rejects_bad_budgets_naming_the_option(capsys, option, value):
    code, _, err = run(capsys, *REFERENCES, option, value)
    assert code == 2
    assert option in err


def test_a_nan_against_a_number_is_named_not_shown_as_a_distance(capsys):
    # the integer conversion writes FP8 NaN codes (0x7f, 0xff) where the baseline has numbers: no two codes
    # are NAN_DISTANCE apart, so the verdict says what the worst pair is
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", "triton-buggy",
                         "--max-code-distance", "8", "--quiet")
    assert code == 1, err
    assert "(exceeds max code distance NaN against a number > 8, " in out and " 255 " not in out
