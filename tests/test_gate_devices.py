"""The gate where it runs: `--device`, cases skipped with their reason (`--strict` fails them), and
`expect = "scale-ulp"` for compiled Triton's approximate fp32 division."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from conftest import run

from fp8check.triton_cpu import interpreter, known_answers

ROOT = Path(__file__).resolve().parent.parent

FAULTS = Path(__file__).parent / "faults"

SCALE_ULP_GATE = """
[defaults]
baseline = "reference"
scale_fmt = "fp32"
num_blocks = 2
device = "cpu"
expect = "scale-ulp"
[[case]]
candidate = "file:{faults}/scale_lastbit.py:writer"
[[case]]
candidate = "file:{faults}/divisor_240.py:writer"
"""


def test_expect_scale_ulp_passes_scale_ulp_bytes_and_fails_any_other_cause(capsys, tmp_path):
    config = tmp_path / "gate.toml"
    config.write_text(SCALE_ULP_GATE.format(faults=FAULTS))
    code, out, err = run(capsys, "gate", str(config), "--json", "-")
    payload = json.loads(out)
    statuses = {case["id"].split("~")[0].rsplit("/", 1)[-1]: case["status"] for case in payload["cases"]}
    assert statuses == {"scale_lastbit.py:writer": "passed", "divisor_240.py:writer": "failed"}, err
    assert code == 1


def test_gate_device_puts_every_case_on_that_device_and_says_so_in_the_ids(capsys):
    code, out, _ = run(capsys, "gate", "gpu", "--device", "cpu", "--list")
    ids = out.split()
    assert code == 0 and len(ids) == 172  # 163 compare, table and parity cases; 7 DeepGEMM, 2 vLLM file
    assert all(case_id.endswith(":cpu") or case_id.endswith("device=cpu") for case_id in ids)


FNUZ_GATE = """
[defaults]
candidate = "triton"
baseline = "reference-vllm"
num_blocks = 1
device = "cpu"
[[case]]
fp8 = ["e4m3fn", "e4m3fnuz"]
"""


@pytest.fixture
def interpreter_without_fnuz(monkeypatch):
    """A stand-in for a Triton whose interpreter cannot convert to e4m3fnuz (Triton 3.6's stock
    interpreter: "fail to convert fp8e4b8 to ir type"): fp8check's exact conversion refuses fnuz."""
    def without_fnuz(tl, handle_cls, original):
        exact = interpreter_exact(tl, handle_cls, original)

        def create_fp_to_fp(self, src, dst_type, rounding_mode):
            if interpreter._SCOPE["fnuz"] or dst_type.scalar == tl.float8e4b8:
                raise ValueError("fail to convert fp8e4b8 to ir type")
            return exact(self, src, dst_type, rounding_mode)

        return create_fp_to_fp

    interpreter_exact = interpreter._exact_fp_to_fp
    monkeypatch.setattr(interpreter, "_exact_fp_to_fp", without_fnuz)
    known_answers.check.cache_clear()
    yield
    known_answers.check.cache_clear()


def test_a_format_this_interpreter_cannot_run_is_skipped_with_its_reason(capsys, tmp_path, interpreter_without_fnuz):
    config = tmp_path / "gate.toml"
    config.write_text(FNUZ_GATE)
    junit = tmp_path / "gate.xml"
    code, out, err = run(capsys, "gate", str(config), "--junit", str(junit))
    assert code == 0, out + err
    assert "SKIP " in out and "PASS: 1 passed, 0 failed, 0 errors, 1 skipped of 2 cases" in out
    assert "cannot run the e4m3fnuz known-answer kernel" in out and "fail to convert fp8e4b8" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("skipped") == "1" and len(suite.findall("testcase/skipped")) == 1

    code, out, _ = run(capsys, "gate", str(config), "--strict")
    assert code == 2
    assert "FAIL: 1 passed, 0 failed, 1 error of 2 cases" in out


def _gate_of(candidate: str, formats: str, device: str) -> str:
    return (f'[defaults]\ncandidate = "{candidate}"\nbaseline = "reference"\nnum_blocks = 1\n'
            f'device = "{device}"\n[[case]]\nfp8 = {formats}\n')


def _parity_gate_of(reader: str, more: str = "") -> str:
    return ('[[case]]\nkind = "parity"\nbaseline = "reference"\nwriters = []\nblock = 16\nctx = [64]\ntopk = 16\n'
            f'heads = 4\n{more}reader = "{reader}"\n')


@pytest.mark.parametrize("config", [
    _gate_of(f"file:{ROOT / 'tests' / 'hostile' / 'user_errors.py'}:claims_a_skip", '["e4m3fn"]', "cpu"),
    _parity_gate_of(f"file:{ROOT / 'tests' / 'hostile' / 'readers.py'}:claims_a_skip"),
], ids=["writer", "reader"])
def test_code_from_a_file_cannot_make_its_case_a_skip(capsys, tmp_path, config):
    # a skip is fp8check's finding about this machine, never the code under test's claim
    (tmp_path / "gate.toml").write_text(config)
    code, out, _ = run(capsys, "gate", str(tmp_path / "gate.toml"))
    assert code == 2 and "SKIP" not in out
    assert "this machine cannot run me" in out and "FAIL: 0 passed, 0 failed, 1 error of 1 case" in out


@pytest.mark.cuda
@pytest.mark.parametrize("config", [
    _gate_of(f"file:{ROOT / 'examples' / 'my_kernels.py'}:indexer_k_quant_and_cache", '["e4m3fn", "e4m3fnuz"]',
             "cuda"),
    _parity_gate_of(f"preset:{ROOT}/tests/projects/standins.toml/vllm-style-triton",
                    'layout = "linear"\ndevice = "cuda"\nfp8 = ["e4m3fn", "e4m3fnuz"]\n'),
], ids=["writer", "reader"])
def test_triton_code_at_e4m3fnuz_on_nvidia_is_skipped_like_the_built_in_writer(capsys, tmp_path, config):
    if torch.version.hip is not None:
        pytest.skip("AMD GPUs run e4m3fnuz")
    (tmp_path / "gate.toml").write_text(config)
    code, out, err = run(capsys, "gate", str(tmp_path / "gate.toml"))
    assert code == 0, out + err
    assert "SKIP " in out and "1 skipped of 2 cases" in out and "e4m3fnuz (fp8e4b8) is not supported" in out
