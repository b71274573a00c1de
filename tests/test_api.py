"""The Python API and the pytest plugin, against a correct and a faulty writer, the way a kernel
repository's test suite would use them."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import torch

import fp8check
from fp8check.core.errors import ConfigError, GoldenError, InputError, ProducerError
from fp8check.testing import assert_same_cache_bytes
from fp8check.core.reference import aiter_writer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def load_fault(name: str):
    spec = importlib.util.spec_from_file_location(f"fault_{name}", ROOT / "tests" / "faults" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.writer


def test_import_fp8check_is_cheap():
    code = "import sys, fp8check; print(sorted(m for m in ('torch', 'triton', 'click') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "[]"


def test_compare_writers_by_name_is_identical():
    result = fp8check.compare_writers("triton", "reference")
    assert result.passed and result.identical
    assert (result.diff_bytes, result.total_bytes) == (0, 25344)
    assert result.value_diff == (0, 0, 0) and result.scale_diff == (0, 0, 0)
    assert result.summary().startswith("IDENTICAL: 0 of 25344 bytes differ in 3 blocks")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.passed = False


def test_compare_writers_with_a_callable_and_a_budget():
    # the CPU's counts: compiled Triton on a GPU adds scale-ulp bytes (docs/GPU.md)
    exact = fp8check.compare_writers(aiter_writer, "reference-vllm", scale_fmt="fp32", device="cpu")
    assert not exact.passed and exact.diff_bytes == 7 and sum(exact.value_diff) == 7
    assert exact.diagnosis.top.category.value == "rounding"
    within = fp8check.compare_writers(aiter_writer, "reference-vllm", scale_fmt="fp32", max_code_distance=1,
                                      device="cpu")
    assert within.passed and within.verdict == "PASS within budget: 7 of 25344 bytes differ (max code distance 1 <= 1)"


def test_compare_writers_maps_the_blocks_it_is_asked_for():
    shown = fp8check.compare_writers("triton-buggy", "reference", map_blocks=(2,), device="cpu")
    assert shown.diagnosis.located.shown_blocks == (2,)
    with pytest.raises(InputError, match=r"--map-blocks 7: the cache has 3 blocks \(0-2\)"):
        fp8check.compare_writers("triton-buggy", "reference", map_blocks=(7,), device="cpu")


def test_compare_writers_takes_k_and_slots():
    generator = torch.Generator().manual_seed(3)
    k = (torch.randn(40, 128, generator=generator) * 4).to(torch.bfloat16)
    slots = torch.randperm(64, generator=generator)[:40]
    result = fp8check.compare_writers("triton", "reference", k=k, slot_mapping=slots, block=16)
    assert result.passed and len(result.value_diff) == 4  # 64 slots of 16: the blocks the slots need
    assert result.check.result.inputs.k.cpu().equal(k)  # on the run's device (a GPU where there is one)


def test_assert_same_cache_bytes_names_the_first_mismatch_and_the_top_cause():
    assert_same_cache_bytes(aiter_writer, "reference", inputs="ties")  # the correct writer: no raise
    with pytest.raises(AssertionError) as info:
        assert_same_cache_bytes(load_fault("ties_away"), "reference", inputs="ties")
    message = str(info.value)
    assert message.startswith("DIFFERENT: ")
    assert "\nfirst mismatch: block " in message
    assert "\nrounding: " in message and "ties to even" in message and "\n  fix: " in message


@pytest.mark.parametrize("keywords, named", [
    ({"fp8": "e5m2"}, "fp8 = 'e5m2'"), ({"seed": 1.5}, "seed must be an integer"), ({"colour": 1}, "colour"),
    ({"max_diff_bytes": -1}, "max_diff_bytes = -1"),
])
def test_bad_keywords_are_refused_with_their_name(keywords, named):
    with pytest.raises(ConfigError, match="compare_writers\\(\\)") as info:
        fp8check.compare_writers("reference", "reference", **keywords)
    assert named in str(info.value)


def test_a_callable_with_the_wrong_signature_is_a_producer_error():
    with pytest.raises(ProducerError, match="must take"):
        fp8check.compare_writers(lambda k: None, "reference")


def test_fp8check_cases_are_parametrize_ready():
    from fp8check.pytest_plugin import fp8check_cases

    params = fp8check_cases(EXAMPLES / "my_gate.toml")
    assert [p.id for p in params][:2] == [
        "vs-auto:e4m3fn-ue8m0:b64-h128-q128-n2-shuffle:normal-sequential-s0",
        "vs-auto:e4m3fn-ue8m0:b64-h128-q128-n2-shuffle:ue8m0-boundary-sequential-s0",
    ]
    (values,) = params[0].values
    assert values["baseline"] == "auto" and values["num_blocks"] == 2 and "candidate" not in values
    buggy = [p for p in fp8check_cases("ci", candidate=True) if p.values[0]["candidate"] == "triton-buggy"]
    assert buggy and all(mark.name == "xfail" and mark.kwargs["strict"] for p in buggy for mark in p.marks)


# ---- the README's example test file, run by pytest as a user would -------------------------------------


def run_example(tmp_path: Path, *, buggy: bool, args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    for name in ("test_my_writer.py", "my_gate.toml", "my_kernels.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    if buggy:  # the seed's bug: the value region handed over as uint8
        kernels = tmp_path / "my_kernels.py"
        text = kernels.read_text()
        fix = "    values = values.view(fp8_dtype)  # the fix: without it the kernel's cast is float -> uint8\n"
        assert fix in text
        kernels.write_text(text.replace(fix, ""))
    registered = any(ep.value.startswith("fp8check") for ep in metadata.entry_points(group="pytest11"))
    plugin = () if registered else ("-p", "fp8check.pytest_plugin")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, *args,
                           "test_my_writer.py"], capture_output=True, text=True, cwd=tmp_path, env=env)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU set-up of a plain pytest run")
def test_the_example_test_file_passes_against_the_fixed_writer(tmp_path):
    done = run_example(tmp_path, buggy=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 passed" in done.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU set-up of a plain pytest run")
def test_the_example_test_file_fails_readably_against_the_buggy_writer(tmp_path):
    done = run_example(tmp_path, buggy=True, args=("-k", "default or normal-sequential"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "4 failed" in done.stdout  # the default spec and the three normal-sequential cases
    assert "AssertionError: DIFFERENT: " in done.stdout
    assert "first mismatch: block 0, token 0" in done.stdout
    assert "integer-cast: " in done.stdout and "fix: view the value region as torch.float8_e4m3fn" in done.stdout


def test_the_readme_and_the_api_page_show_the_example_files_verbatim():
    readme, api = (ROOT / "README.md").read_text(), (ROOT / "docs" / "api.md").read_text()
    assert f"```python\n{(EXAMPLES / 'test_my_writer.py').read_text()}```" in readme
    assert f"```python\n{(EXAMPLES / 'test_my_writer.py').read_text()}```" in api
    assert f"```toml\n{(EXAMPLES / 'my_gate.toml').read_text()}```" in api


def test_a_golden_baseline_brings_its_spec_and_inputs(tmp_path):
    from fp8check.cli import main

    golden = tmp_path / "aiter.safetensors"
    assert main(["record", "--producer", "reference", "--out", str(golden), "--block", "16", "--head-dim", "64",
                 "--num-blocks", "2", "--fp8", "e4m3fnuz", "--scale-fmt", "fp32"]) == 0
    result = fp8check.compare_writers("reference", f"golden:{golden}")
    assert result.passed and result.check.result.spec.fp8.value == "e4m3fnuz" and len(result.value_diff) == 2
    with pytest.raises(AssertionError, match="scale-ratio"):  # aiter's 240 against vLLM's 224 on fnuz
        assert_same_cache_bytes("reference-vllm", f"golden:{golden}")
    with pytest.raises(GoldenError, match="--head-dim 128 contradicts"):  # a stated spec key must agree
        fp8check.compare_writers("reference", f"golden:{golden}", head_dim=128)
