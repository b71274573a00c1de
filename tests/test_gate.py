"""`fp8check gate`: configs expanded into stable case ids, shards, selection, and the reports CI reads
(JUnit XML, JSON on stdout, a Markdown step summary, --quiet), for gate and for single commands."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import run
import pytest

from fp8check.cli import main

PLUGINS = Path(__file__).parent / "plugins"

# Three exact cases, a known-bad writer that must keep failing, a planted failure (fp32 scales: aiter's
# x * fl(1/s) against vLLM's x / s differ by one code on a few bytes) and the seed table.
SMALL = """
[defaults]
block = 16
head_dim = 64
num_blocks = 2

[matrix]
candidate = "triton"
baseline = "reference"
inputs = ["normal", "ties", "tiny"]

[[case]]
candidate = "triton-buggy"
baseline = "reference"
expect = "different"

[[case]]
candidate = "reference-vllm"
baseline = "reference"
scale_fmt = "fp32"
num_blocks = 3
block = 64
head_dim = 128

[[case]]
kind = "table"
baseline = "reference"
"""
PLANTED = "compare:reference-vllm~reference:e4m3fn-fp32:b64-h128-q128-n3-shuffle:normal-sequential-s0"



@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "gate.toml"
    path.write_text(SMALL)
    return path


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def strict_json(text: str):
    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def junit_cases(path: Path) -> list[ET.Element]:
    """The <testcase> elements of a JUnit file, after checking the structure CI systems rely on."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    failures = [c for c in cases if c.find("failure") is not None]
    errors = [c for c in cases if c.find("error") is not None]
    for element in (root, suite):
        assert (int(element.get("tests")), int(element.get("failures")), int(element.get("errors"))) == (
            len(cases), len(failures), len(errors))
        float(element.get("time"))
    for case in cases:
        assert case.get("name") and case.get("classname").startswith("fp8check.")
        float(case.get("time"))
        assert len([child for child in case if child.tag in ("failure", "error")]) <= 1
    return cases


# ---- the gate end to end ------------------------------------------------------------------------------


def test_gate_with_a_planted_failure_exits_1_and_names_it_in_junit(capsys, small, tmp_path):
    junit = tmp_path / "out.xml"
    code, out, err = run(capsys, "gate", str(small), "--junit", str(junit))
    assert code == 1, err
    cases = junit_cases(junit)
    assert len(cases) == 6
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == [PLANTED]
    failure = failed[0].find("failure")
    # message: the verdict and the top cause; text: the first mismatch and the hints
    assert failure.get("message").startswith("DIFFERENT: 7 of 25344 bytes differ")
    assert "; rounding (7 bytes): " in failure.get("message")
    assert failure.text.startswith("first mismatch: block ")
    assert "\n  fix: " in failure.text
    assert "FAIL: 5 passed, 1 failed, 0 errors of 6 cases" in out


def test_junit_parses_with_junitparser(capsys, small, tmp_path):
    junitparser = pytest.importorskip("junitparser")
    junit = tmp_path / "out.xml"
    assert run(capsys, "gate", str(small), "--junit", str(junit))[0] == 1
    xml = junitparser.JUnitXml.fromfile(str(junit))
    cases = [case for suite in xml for case in suite]
    assert len(cases) == 6
    failed = [case for case in cases if not case.is_passed]
    assert [case.name for case in failed] == [PLANTED]


def test_json_on_stdout_is_the_only_output_there_and_strict(capsys, small):
    code, out, err = run(capsys, "gate", str(small), "--json", "-")
    assert code == 1
    payload = strict_json(out)  # nothing else on stdout
    assert payload["schema_version"] == 2 and payload["kind"] == "gate" and payload["exit_code"] == 1
    assert payload["counts"] == {"selected": 6, "ran": 6, "passed": 5, "failed": 1, "error": 0, "skipped": 0}
    assert [c["id"] for c in payload["cases"] if c["status"] == "failed"] == [PLANTED]
    planted = next(c for c in payload["cases"] if c["id"] == PLANTED)
    assert planted["result"]["diff_bytes"] == 7 and sum(planted["result"]["value_diff"]) == 7
    assert set(payload["run"]) == {"seconds", "case_seconds", "versions"}
    assert set(payload["run"]["case_seconds"]) == {c["id"] for c in payload["cases"]}
    assert "FAIL: 5 passed" in err  # the human report went to stderr


def test_quiet_prints_the_verdict_line_only(capsys, small):
    code, out, _ = run(capsys, "gate", str(small), "--quiet", "-k", "ties")
    assert code == 0
    assert out.splitlines() == [out.strip()] and out.startswith("PASS: 1 passed, 0 failed, 0 errors of 1 case in ")


def test_markdown_goes_to_the_github_step_summary(capsys, small, tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert run(capsys, "gate", str(small), "--quiet")[0] == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n### fp8check gate ")  # appended, not overwritten
    row = next(line for line in text.splitlines() if line.startswith(f"| ❌ | `{PLANTED}` | "))
    seconds, verdict = row.split(" | ")[2:4]
    assert float(seconds) > 0 and verdict.startswith("DIFFERENT: 7 of 25344 bytes differ")
    assert text.count("| ✅ |") == 5


def test_expect_different_fails_when_the_known_bad_writer_matches(capsys, tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text('[[case]]\ncandidate = "reference"\nbaseline = "reference"\nexpect = "different"\n')
    code, out, _ = run(capsys, "gate", str(path))
    assert code == 1
    assert "FAIL (expected to differ): IDENTICAL: 0 of 25344 bytes differ" in out


def test_budget_cases_pass_within_budget(capsys, tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text('[[case]]\ncandidate = "reference-vllm"\nbaseline = "reference"\nscale_fmt = "fp32"\n'
                    "max_code_distance = 1\n")
    code, out, _ = run(capsys, "gate", str(path), "--json", "-")
    assert code == 0
    (case,) = strict_json(out)["cases"]
    assert case["id"].endswith(":budget-dist1")
    assert case["verdict"] == "PASS within budget: 7 of 25344 bytes differ (max code distance 1 <= 1)"


def test_the_exit_code_is_the_worst_case(capsys, small, tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text(SMALL + '\n[[case]]\ncandidate = "no-such-writer"\n')
    code, out, _ = run(capsys, "gate", str(path))
    assert code == 2  # a producer error outranks the failed verdict
    assert "ERROR" in out and "unknown producer 'no-such-writer'" in out


def test_fail_fast_stops_at_the_first_case_that_does_not_pass(capsys, small):
    code, out, _ = run(capsys, "gate", str(small), "--fail-fast", "--json", "-")
    assert code == 1
    payload = strict_json(out)
    assert [c["status"] for c in payload["cases"]] == ["passed"] * 4 + ["failed"]
    assert payload["counts"]["selected"] == 6 and payload["counts"]["ran"] == 5


def test_every_summary_of_a_fail_fast_gate_says_it_stopped(capsys, small, tmp_path):
    summary = tmp_path / "s.md"
    code, out, _ = run(capsys, "gate", str(small), "--fail-fast", "--markdown", str(summary))
    assert code == 1
    assert "(stopped after 5: --fail-fast)" in out.splitlines()[-1]
    assert summary.read_text().splitlines()[2].endswith("(stopped after 5: --fail-fast)")


# ---- case ids, --list, -k, --shard ------------------------------------------------------------------------


def listed(capsys, *argv: str) -> list[str]:
    code, out, err = run(capsys, "gate", *argv, "--list")
    assert code == 0, err
    return out.splitlines()


def test_list_prints_stable_ids_built_from_parameters(capsys, small):
    assert listed(capsys, str(small)) == [
        "compare:triton~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0",
        "compare:triton~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:ties-sequential-s0",
        "compare:triton~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:tiny-sequential-s0",
        "compare:triton-buggy~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0",
        PLANTED,
        "table:triton-buggy+triton~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0",
    ]


def test_pairs_and_lists_expand_as_a_product_in_order(capsys, tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text('[matrix]\npairs = [{baseline = "reference", candidate = "triton"},'
                    ' {baseline = "reference-vllm", candidate = "reference"}]\nseed = [0, 7]\n')
    assert listed(capsys, str(path)) == [
        f"compare:{pair}:e4m3fn-ue8m0:b64-h128-q128-n3-shuffle:normal-sequential-s{seed}"
        for pair in ("triton~reference", "reference~reference-vllm") for seed in (0, 7)
    ]


def test_k_selects_by_substring_or_glob(capsys, small):
    assert listed(capsys, str(small), "-k", "ties") == [
        "compare:triton~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:ties-sequential-s0"]
    assert len(listed(capsys, str(small), "-k", "table:*", "-k", "*fp32*")) == 2
    code, _, err = run(capsys, "gate", str(small), "-k", "nothing-like-this", "--list")
    assert code == 2 and "no case" in err


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_shards_hold_every_case_exactly_once(capsys, n):
    everything = listed(capsys, "ci")
    shards = [listed(capsys, "ci", "--shard", f"{k}/{n}") for k in range(1, n + 1)]
    together = [case for shard in shards for case in shard]
    assert sorted(together) == sorted(everything) and len(set(together)) == len(everything)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert shards == [listed(capsys, "ci", "--shard", f"{k}/{n}") for k in range(1, n + 1)]  # deterministic


@pytest.mark.parametrize("shard", ["0/3", "4/3", "1", "a/b", "1/0"])
def test_bad_shards_are_refused(capsys, shard):
    code, _, err = run(capsys, "gate", "ci", "--shard", shard, "--list")
    assert code == 2 and f"--shard {shard!r}" in err


def test_the_default_gate_covers_every_distribution_slot_pattern_and_format(capsys):
    from fp8check.core.inputs import Distribution, SlotPattern

    ids = listed(capsys, "configs/ci.toml")
    assert len(ids) == len(set(ids)) >= 100
    for d in Distribution:
        assert any(f":{d.value}-" in i for i in ids), d
    for s in SlotPattern:
        assert any(f"-{s.value}-s" in i for i in ids), s
    for fmt in ("e4m3fn-ue8m0", "e4m3fn-fp32", "e4m3fnuz-ue8m0", "e4m3fnuz-fp32"):
        assert any(f":{fmt}:" in i and i.startswith("compare:triton~") for i in ids), fmt
    assert any(i.startswith("compare:triton-buggy~") for i in ids)
    assert any(i.startswith("table:") for i in ids)


def test_a_shard_of_the_default_gate_passes(capsys, tmp_path):
    junit = tmp_path / "ci.xml"
    code, out, err = run(capsys, "gate", "ci", "--shard", "1/12", "--junit", str(junit), "--quiet")
    assert code == 0, out + err
    assert all(c.find("failure") is None and c.find("error") is None for c in junit_cases(junit))


# ---- config values validated like the CLI's options -------------------------------------------------------


BAD_VALUES = [
    ('fp8 = "e5m2"', "fp8 = 'e5m2'"), ('slots = "random"', "slots = 'random'"),
    ("seed = 1.5", "seed must be an integer, got 1.5"), ('device = "tpu"', "device = 'tpu'"),
    ('block = "sixty"', "block must be an integer, got 'sixty'"), ("block = 0", "block = 0"),
    ('inputs = "gaussian"', "inputs = 'gaussian'"), ("max_diff_fraction = 2.0", "max_diff_fraction = 2.0"),
    ("specials_inf_nan = 1", "specials_inf_nan must be true or false"), ("colour = 3", "unknown key(s) colour"),
]


@pytest.mark.parametrize("line, message", BAD_VALUES)
def test_bad_gate_values_name_the_file_the_case_and_the_key(capsys, tmp_path, line, message):
    path = tmp_path / "gate.toml"
    path.write_text(f'[[case]]\ncandidate = "triton"\n\n[[case]]\n{line}\n')
    code, out, err = run(capsys, "gate", str(path), "--list")
    assert code == 2 and out == ""
    assert err.startswith(f"fp8check: error: {path} [[case]] #2: ") and message in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("line, message", [v for v in BAD_VALUES if not v[0].startswith("max_diff")])
def test_bad_table_config_values_name_the_file_and_the_key(capsys, tmp_path, line, message):
    path = tmp_path / "table.toml"
    path.write_text(f"[table]\n{line}\n")
    code, out, err = run(capsys, "table", "--config", str(path))
    assert code == 2, err
    assert err.startswith(f"fp8check: error: {path} [table]: ") and message in err


def test_an_impossible_spec_is_refused_before_anything_runs(capsys, tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text("[[case]]\nhead_dim = 72\n")
    code, _, err = run(capsys, "gate", str(path))
    assert code == 2
    assert err == f"fp8check: error: {path} [[case]] #1: head_dim must be a multiple of 16, got 72\n"


def test_lists_in_defaults_and_duplicate_ids_are_refused(capsys, tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text('[defaults]\nseed = [1, 2]\n[[case]]\ncandidate = "triton"\n')
    code, _, err = run(capsys, "gate", str(path), "--list")
    assert code == 2 and "[defaults]: seed must be an integer" in err
    path.write_text('[[case]]\ncandidate = "triton"\n[[case]]\ncandidate = "triton"\n')
    code, _, err = run(capsys, "gate", str(path), "--list")
    assert code == 2 and "is also made by" in err and "[[case]] #2" in err


def test_file_writers_are_found_next_to_the_config(capsys, tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text(f'[[case]]\ncandidate = "file:{PLUGINS.name}/corrupt_one_byte.py:writer"\nbaseline = "reference"\n')
    (tmp_path / PLUGINS.name).symlink_to(PLUGINS)
    code, out, _ = run(capsys, "gate", str(path), "--json", "-")
    assert code == 1
    (case,) = strict_json(out)["cases"]
    assert case["id"] == "compare:file:plugins/corrupt_one_byte.py:writer~reference:e4m3fn-ue8m0:b64-h128-q128-n3-shuffle:normal-sequential-s0"
    assert case["result"]["diff_bytes"] == 1


PARITY = """
[[case]]
kind = "parity"
ctx = [1024, 4096]
topk = 512
heads = 4
writers = ["triton-buggy", "triton"]
expect_fail = ["triton-buggy"]

[[case]]
kind = "parity"
ctx = [4096]
topk = 512
heads = 4
writers = ["triton-buggy"]
"""


def test_parity_cases_run_in_the_gate(capsys, tmp_path):
    pytest.importorskip("fp8check.run.parity")
    path = tmp_path / "gate.toml"
    path.write_text(PARITY)
    junit = tmp_path / "p.xml"
    code, out, err = run(capsys, "gate", str(path), "--junit", str(junit), "--json", "-")
    assert code == 1, err
    passed, failed = strict_json(out)["cases"]
    assert passed["id"] == "parity:ctx=1024,4096:heads=4:topk=512:writers=triton-buggy,triton:expect_fail=triton-buggy"
    assert passed["status"] == "passed" and passed["result"]["passed"] is True
    assert failed["status"] == "failed"
    assert failed["verdict"] == "FAIL: top-512 parity of triton-buggy read by reference, ctx 4096-4096"
    assert failed["cause"].startswith("triton-buggy: FAIL: lowest recall ")
    assert [c.get("name") for c in junit_cases(junit) if c.find("failure") is not None] == [failed["id"]]


def test_parity_values_are_checked_with_parity_rules(capsys, tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text('[[case]]\nkind = "parity"\nslots = "padded"\n[[case]]\nkind = "parity"\nctx = [0]\n')
    code, _, err = run(capsys, "gate", str(path), "--list")
    assert code == 2 and "[[case]] #1: slots = 'padded'" in err
    path.write_text('[[case]]\nkind = "parity"\nctx = [0]\n')
    code, _, err = run(capsys, "gate", str(path), "--list")
    assert code == 2 and "[[case]] #1: ctx = 0" in err


# ---- single commands write the same reports ----------------------------------------------------------------


def test_compare_writes_junit_json_to_stdout_and_markdown(capsys, tmp_path):
    junit, markdown = tmp_path / "c.xml", tmp_path / "c.md"
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", "reference-vllm",
                         "--scale-fmt", "fp32", "--junit", str(junit), "--markdown", str(markdown), "--json", "-")
    assert code == 1
    payload = strict_json(out)
    assert payload["kind"] == "compare" and payload["passed"] is False and payload["diff_bytes"] == 7
    assert payload["verdict"].startswith("DIFFERENT: 7 of 25344 bytes differ")
    (case,) = junit_cases(junit)
    assert case.get("name") == f"{PLANTED}:cpu"  # the id the same case has in a gate (run() names the CPU)
    assert case.find("failure").get("message").startswith("DIFFERENT: 7 of 25344")
    assert "### fp8check compare: FAIL" in markdown.read_text()
    assert "first mismatch" in err  # the report went to stderr


def test_compare_json_has_no_bare_nan(capsys):
    code, out, _ = run(capsys, "compare", "--inputs", "specials", "--specials-inf-nan", "--json", "-", "--quiet")
    payload = strict_json(out)
    assert payload["first_mismatch"] is not None
    assert '"nan"' in out or '"inf"' in out or '"-inf"' in out


def test_table_quiet_and_junit(capsys, tmp_path):
    junit = tmp_path / "t.xml"
    code, out, _ = run(capsys, "table", "--config", "seed-table", "--num-blocks", "2", "--quiet",
                       "--junit", str(junit))
    assert code == 0
    assert out == "PASS: the fixed wrapper matches byte for byte; the buggy wrapper differs\n"
    (case,) = junit_cases(junit)
    assert case.get("name") == "table:triton-buggy+triton~auto:e4m3fn-ue8m0:b64-h128-q128-n2-shuffle:normal-sequential-s0:cpu"


def test_unwritable_report_paths_fail_before_running(capsys, tmp_path):
    code, _, err = run(capsys, "gate", "ci", "--junit", str(tmp_path / "missing" / "x.xml"))
    assert code == 2 and "--junit" in err and "does not exist" in err


def test_golden_baselines_replay_their_recording(capsys, tmp_path):
    golden = tmp_path / "aiter.safetensors"
    assert main(["record", "--producer", "reference", "--out", str(golden), "--block", "16", "--head-dim", "64",
                 "--num-blocks", "2", "--inputs", "ties"]) == 0
    path = tmp_path / "gate.toml"
    path.write_text(
        "[defaults]\nblock = 64\nseed = 3\n"  # defaults do not apply to the recording
        '[[case]]\nbaseline = "golden:aiter.safetensors"\ncandidate = ["triton", "triton-buggy"]\n'
        '[[case]]\nbaseline = "golden:aiter.safetensors"\ncandidate = "reference"\nblock = 32\nmax_diff_bytes = 1\n')
    capsys.readouterr()
    code, out, _ = run(capsys, "gate", str(path), "--json", "-")
    assert code == 2
    exact, buggy, contradicted = strict_json(out)["cases"]
    assert exact["id"] == "compare:triton~golden:aiter.safetensors" and exact["status"] == "passed"
    assert exact["result"]["spec"]["block_size"] == 16 and exact["result"]["inputs"] == "replayed from golden aiter.safetensors"
    assert buggy["status"] == "failed" and buggy["cause"].startswith("integer-cast (")
    assert contradicted["id"] == "compare:reference~golden:aiter.safetensors:budget-bytes1"
    assert contradicted["exit_code"] == 2 and "--block 32 contradicts" in contradicted["error"]
    path.write_text('[[case]]\nbaseline = "golden:aiter.safetensors"\nseed = 1\n')
    code, _, err = run(capsys, "gate", str(path), "--list")
    assert code == 2 and "[[case]] #1: seed cannot be combined with baseline = 'golden:aiter.safetensors'" in err


@pytest.mark.parametrize("config, command", [("seed-table", "table"), ("seed-parity", "parity")])
def test_a_seed_config_given_to_the_gate_names_its_command(capsys, config, command):
    code, out, err = run(capsys, "gate", config)
    assert (code, out) == (2, "")
    assert err.strip().endswith(f"a [{command}] section is a config of `fp8check {command} --config`, not a gate")


def test_layers_and_the_padding_slot_are_part_of_a_case_id(capsys, tmp_path):
    # cases that differ only there are different runs: not duplicates, and not one JUnit name for two verdicts
    path = tmp_path / "g.toml"
    path.write_text('[defaults]\nblock = 16\nhead_dim = 64\nnum_blocks = 2\ncandidate = "reference-vllm"\n'
                    'baseline = "reference"\n\n[[case]]\nlayers = [1, 2]\n\n[[case]]\nslots = "padded"\n\n'
                    '[[case]]\nslots = "padded"\npad_slot = 0\n')
    code, out, err = run(capsys, "gate", str(path), "--list")
    assert (code, err) == (0, "")
    ids = out.split()
    assert len(ids) == len(set(ids)) == 4
    assert [i.split(":")[3].endswith("-L2") for i in ids] == [False, True, False, False]
    assert [i.endswith("-pad0") for i in ids] == [False, False, False, True]


def test_a_single_parity_run_id_names_only_the_values_it_has(capsys, tmp_path):
    junit = tmp_path / "p.xml"
    code, _, err = run(capsys, "parity", "--ctx", "256,512", "--topk", "64", "--heads", "4", "--quiet",
                       "--junit", str(junit))
    assert code == 0, err
    names = [case.get("name") for case in ET.parse(junit).iter("testcase")]
    assert names and all(name.startswith("parity:ctx=256,512:") and "None" not in name for name in names)


def test_list_with_a_report_is_bad_usage(capsys, tmp_path):
    # --list runs nothing: a report of it would look like a run; the error goes where the report would
    report = tmp_path / "g.json"
    code, out, err = run(capsys, "gate", "ci", "--list", "--json", str(report))
    assert (code, out) == (2, "")
    assert err == "fp8check: error: --list prints the case ids and runs nothing: it writes no report (--json)\n"
    assert json.loads(report.read_text())["exit_code"] == 2
