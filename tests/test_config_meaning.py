"""One meaning per config (issue 24, item 4; issue 20, item 5): every key of every table validated, the
same [matrix] and `expect` semantics in `fp8check gate` and in `fp8check_cases`, ids built from values,
a cap on the cases, pytest's -k grammar, git sources in producer and golden fields, signed goldens
trusted the same way in gate and the API, and a plugin that costs nothing to load."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import run
import pytest

from fp8check.run import gate_config
from fp8check.core.errors import ConfigError, GoldenError, UsageError
from fp8check.pytest_plugin import fp8check_cases

ROOT = Path(__file__).parent.parent
SMALL_DEFAULTS = "[defaults]\nblock = 16\nhead_dim = 64\nnum_blocks = 2\n"


def config(tmp_path, text: str, name: str = "gate.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path



@pytest.mark.parametrize("line, fragment", [
    ('candiate = "triton-buggy"', "[defaults]: unknown key(s) candiate"),
    ("num_block = 2", "[defaults]: unknown key(s) num_block"),
    ("max_diff_fraction = nan", "max_diff_fraction = nan: nan is not a finite number"),
    ('seed = "1"', "[defaults]: seed must be an integer, got '1'"),
    ('expect = "maybe"', "[defaults]: expect = 'maybe': expected one of same, different"),
])
def test_every_key_of_defaults_is_validated_with_its_name(tmp_path, line, fragment):
    path = config(tmp_path, f"[defaults]\n{line}\n[matrix]\ncandidate = \"triton\"\n")
    with pytest.raises(ConfigError) as caught:
        gate_config.load(path)
    assert fragment in str(caught.value) and str(path) in str(caught.value)


def test_a_nan_budget_in_a_case_is_refused(tmp_path):
    path = config(tmp_path, "[[case]]\nmax_diff_fraction = nan\n")
    with pytest.raises(ConfigError, match=r"\[\[case\]\] #1: max_diff_fraction = nan: nan is not a finite number"):
        gate_config.load(path)


def test_wrong_typed_pairs_are_called_wrong_typed(tmp_path):
    path = config(tmp_path, '[matrix]\npairs = "reference,triton"\n')
    with pytest.raises(ConfigError, match=r"\[matrix\]: pairs must be an array of tables of baseline and candidate,"
                                          r" got str 'reference,triton'"):
        gate_config.load(path)


def test_a_matrix_of_a_billion_cases_is_refused_at_once(tmp_path):
    seeds = ", ".join(map(str, range(1000)))
    path = config(tmp_path, f"[matrix]\nseed = [{seeds}]\nnum_blocks = [{', '.join(map(str, range(1, 1001)))}]\n"
                            f"max_diff_bytes = [{seeds}]\n")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"\[matrix\]: the config makes more than 10,000 cases \(1,000,000,000 so far\)"):
        gate_config.load(path)
    assert time.monotonic() - start < 5


def test_gate_list_of_too_many_cases_is_exit_2(capsys, tmp_path):
    path = config(tmp_path, f"[matrix]\nseed = [{', '.join(map(str, range(10_001)))}]\n")
    code, _, err = run(capsys, "gate", path, "--list")
    assert code == 2 and "more than 10,000 cases" in err and err.count("\n") == 1, err


MIXED = SMALL_DEFAULTS + """
[matrix]
candidate = ["triton", "reference"]
baseline = "reference"
inputs = ["normal", "ties"]

[[case]]
candidate = "triton-buggy"
baseline = "reference"
expect = "different"

[[case]]
candidate = "file:writers/mine.py:writer"
baseline = "reference-vllm"

[[case]]
candidate = "vllm-file:writers/vllm_copy.py"
baseline = "reference-vllm"
"""


def test_cases_for_the_tests_writer_collapse_candidates_and_leave_out_other_writers_expectations(tmp_path):
    params = fp8check_cases(config(tmp_path, MIXED))
    ids = [p.id for p in params]
    assert ids == ["vs-reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0",
                   "vs-reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:ties-sequential-s0",
                   "vs-reference-vllm:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0"]
    assert all(not p.marks and "candidate" not in p.values[0] for p in params)
    assert params[2].values[0]["baseline"] == "reference-vllm" and params[2].values[0]["block"] == 16


def test_cases_with_their_candidates_keep_each_expectation_on_its_own_candidate(tmp_path):
    params = fp8check_cases(config(tmp_path, MIXED), candidate=True)
    by_id = {p.id: p for p in params}
    assert len(params) == 7
    buggy = by_id["compare:triton-buggy~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0"]
    assert buggy.values[0]["candidate"] == "triton-buggy"
    assert [(m.name, m.kwargs["strict"]) for m in buggy.marks] == [("xfail", True)]
    mine = [p for p in params if "mine.py" in p.id]
    assert mine[0].values[0]["candidate"] == f"file:{tmp_path / 'writers' / 'mine.py'}:writer"
    assert mine[0].id == "compare:file:writers/mine.py:writer~reference-vllm:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0"


@pytest.mark.parametrize("expression, expected", [
    ("ties", ["ties/triton", "ties/reference"]),
    ("normal and not triton-buggy", ["normal/triton", "normal/reference"]),
    ("(ties or buggy) and not reference~", ["ties/triton", "buggy"]),
    ("ties or *buggy*", ["ties/triton", "ties/reference", "buggy"]),
    ("not (compare:triton~ or compare:reference~)", ["buggy"]),
])
def test_k_takes_pytests_expression_grammar(tmp_path, expression, expected):
    cases = gate_config.load(config(tmp_path, MIXED.split("[[case]]\ncandidate = \"file:")[0])).cases
    picked = gate_config.select(cases, (expression,))
    names = {"compare:triton~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0": "normal/triton",
             "compare:triton~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:ties-sequential-s0": "ties/triton",
             "compare:reference~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0": "normal/reference",
             "compare:reference~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:ties-sequential-s0": "ties/reference",
             "compare:triton-buggy~reference:e4m3fn-ue8m0:b16-h64-q64-n2-shuffle:normal-sequential-s0": "buggy"}
    assert sorted(names[c.id] for c in picked) == sorted(expected)


@pytest.mark.parametrize("expression", ["ties and", "(ties", "ties )", "and"])
def test_a_malformed_k_expression_says_what_is_supported(tmp_path, expression):
    with pytest.raises(UsageError, match="pytest's: words, and, or, not, parentheses|expected '\\)'"):
        gate_config.select(gate_config.load(config(tmp_path, "[matrix]\n")).cases, (expression,))


@pytest.fixture
def repository(tmp_path, capsys) -> Path:
    """A git repository holding a writer and a recording of the reference writer."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mine.py").write_text((ROOT / "tests" / "plugins" / "corrupt_one_byte.py").read_text())
    code, _, err = run(capsys, "record", "--producer", "reference", "--out", repo / "ref.safetensors",
                       "--block", "16", "--head-dim", "64", "--num-blocks", "2")
    assert code == 0, err
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "writer and recording"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, env=env)
    (repo / "ref.safetensors").unlink()  # only the committed bytes remain
    return repo


def test_git_sources_work_in_producer_and_golden_fields_of_a_gate_config(capsys, tmp_path, repository):
    path = config(tmp_path, f"""
[[case]]
candidate = "reference"
baseline = "golden:git:HEAD:ref.safetensors"
repo = "{repository}"

[[case]]
candidate = "file:git:HEAD:mine.py:writer"   # corrupts one byte
baseline = "reference"
expect = "different"
block = 16
head_dim = 64
num_blocks = 2
repo = "{repository}"
""")
    code, out, err = run(capsys, "gate", path)
    assert code == 0, out + err
    assert "PASS" in out and "compare:reference~golden:git:HEAD:ref.safetensors" in out
    assert "compare:file:git:HEAD:mine.py:writer~reference" in out


def test_gate_and_api_refuse_an_unsigned_golden_when_the_key_is_set(capsys, tmp_path, repository, monkeypatch):
    from fp8check.api import compare_writers

    golden_file = tmp_path / "unsigned.safetensors"
    code, _, err = run(capsys, "record", "--producer", "triton-buggy", "--out", golden_file,
                       "--block", "16", "--head-dim", "64", "--num-blocks", "2")
    assert code == 0, err
    monkeypatch.setenv("FP8CHECK_GOLDEN_KEY", "secret")
    path = config(tmp_path, f'[[case]]\ncandidate = "triton-buggy"\nbaseline = "golden:{golden_file}"\n')
    code, out, err = run(capsys, "gate", path)
    assert code == 2 and "not signed, and FP8CHECK_GOLDEN_KEY is set" in out + err
    with pytest.raises(GoldenError, match="not signed, and FP8CHECK_GOLDEN_KEY is set"):
        compare_writers("triton-buggy", f"golden:{golden_file}")


def test_gate_accepts_a_golden_signed_with_the_key(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FP8CHECK_GOLDEN_KEY", "secret")
    golden_file = tmp_path / "signed.safetensors"
    code, _, err = run(capsys, "record", "--producer", "reference", "--out", golden_file,
                       "--block", "16", "--head-dim", "64", "--num-blocks", "2")
    assert code == 0, err
    path = config(tmp_path, f'[[case]]\ncandidate = "reference"\nbaseline = "golden:{golden_file}"\n')
    code, out, err = run(capsys, "gate", path)
    assert code == 0, out + err


def test_loading_the_plugin_imports_neither_torch_nor_triton_and_sets_no_environment_variable():
    check = ("import os, sys; before = dict(os.environ); import fp8check.pytest_plugin;"
             " assert 'torch' not in sys.modules and 'triton' not in sys.modules, sorted(sys.modules);"
             " assert dict(os.environ) == before")
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def readme_gate_example() -> str:
    """The docs' gate config example, verbatim: the first TOML block after the paragraph on case ids, in
    whichever page of docs/ holds the gate's reference."""
    anchor = "Case ids are built from the parameters"
    (page,) = [text for path in sorted((ROOT / "docs").glob("*.md")) if anchor in (text := path.read_text())]
    start = page.index("```toml\n", page.index(anchor))
    return page[start + len("```toml\n"):page.index("```\n", start + 1)]


def test_the_readmes_gate_example_passes_as_written_with_the_readmes_example_writer(capsys, tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "my_writer.py").write_text((ROOT / "examples" / "my_kernels.py").read_text())
    path = config(tmp_path, readme_gate_example())
    code, out, err = run(capsys, "gate", path)
    assert code == 0, out + err
    assert "PASS: 5 passed, 0 failed, 0 errors of 5 cases" in out


@pytest.mark.parametrize("line, key, fragment", [('ctx = "x"', "ctx", "list of integers"),
                                                 ("writers = [1]", "writers", "must be a string, got 1")])
def test_a_wrong_typed_parity_config_value_names_the_file_and_the_key(capsys, tmp_path, line, key, fragment):
    path = config(tmp_path, f"[parity]\n{line}\n", "parity.toml")
    code, _, err = run(capsys, "parity", "--config", path)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"fp8check: error: {path} [parity]: {key}") and fragment in err, err


def test_fp8check_cases_of_the_readmes_gate_example_with_file_candidates(tmp_path):
    path = config(tmp_path, readme_gate_example())
    assert [p.id for p in fp8check_cases(path)] == [
        f"vs-reference-vllm:e4m3fn-{fmt}:b64-h128-q128-n2-shuffle:{inputs}-sequential-s0"
        for fmt in ("ue8m0", "fp32") for inputs in ("normal", "ue8m0-boundary")]
    with_candidates = fp8check_cases(path, candidate=True)
    assert with_candidates[0].values[0]["candidate"] == \
        f"file:{tmp_path / 'kernels' / 'my_writer.py'}:indexer_k_quant_and_cache"
    assert with_candidates[-1].id.startswith("compare:triton-buggy~auto:") and with_candidates[-1].marks


def test_defaults_that_only_some_kinds_take_are_accepted(tmp_path):
    path = config(tmp_path, '[defaults]\nslots = "padded"\nheads = 4\n[matrix]\ncandidate = "triton"\n')
    (case,) = gate_config.load(path).cases
    assert case.values["slots"] == "padded" and "heads" not in case.values
