"""CPU and GPU runs mix in one process: a Triton kernel runs interpreted on CPU tensors and compiled on GPU
tensors, whatever ran before, with the bytes and verdicts of separate processes. The CPU half runs on every
machine; the halves that need a GPU are marked `cuda`."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fp8check.api import compare_writers

ROOT = Path(__file__).parents[1]
OPS = ROOT / "tests" / "kernels" / "rocm_indexer_ops.py"
# A user's writer in this process: vLLM-style file (module-level platform code, a Triton kernel per
# token with tl.max and int1 masks), passed to the API as a function.
USER = f"vllm-file:{OPS}"

# One call of the API, by its keywords: (candidate, device, num_blocks).
CPU_TRITON = ("triton", "cpu", 2)
CUDA_TRITON = ("triton", "cuda", 64)
CPU_USER = ("user", "cpu", 2)
CUDA_USER = ("user", "cuda", 64)


def digest(result) -> str:
    """sha256 of both caches a compare wrote (the candidate's and the baseline's bytes)."""
    record = result.check.result
    data = record.candidate.buffer.buffer.cpu().numpy().tobytes() + record.baseline.buffer.buffer.cpu().numpy().tobytes()
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=None)
def writer(candidate: str):
    """A producer name, or the user's function: one module, one kernel object, on every device."""
    if candidate == "user":
        from fp8check.core.spec import FP8Format
        from fp8check.code.load import load_function

        return load_function(USER, fp8=FP8Format.E4M3FN).fn
    return candidate


def call(candidate: str, device: str, num_blocks: int) -> tuple[str, str]:
    result = compare_writers(writer(candidate), "reference-vllm", device=device, num_blocks=num_blocks)
    return result.verdict, digest(result)


SEPARATE = """
import json, sys
sys.path.insert(0, "tests")
from test_devices import call
print(json.dumps(call(*json.loads(sys.argv[1]))))
"""


def separate(candidate: str, device: str, num_blocks: int) -> tuple[str, str]:
    """The same call in a fresh process of its own."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SEPARATE, json.dumps([candidate, device, num_blocks])],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def triton_state() -> dict:
    """What a CPU run must leave as it found it: the launch and call paths of Triton kernels, the
    interpreter's conversions, triton.language's attributes, the environment."""
    import triton.language as tl
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    owners = (JITFunction, interpreter.InterpretedFunction, interpreter.InterpreterBuilder, tl, tl.core, tl.standard,
              tl.math, tl.tensor, tl.dtype)
    return {"attrs": {owner.__name__: dict(vars(owner)) for owner in owners},
            "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET")}


@pytest.mark.interpreter
def test_a_cpu_run_leaves_triton_and_the_environment_as_it_found_them():
    import triton  # noqa: F401  (imported first, as a user's test suite would)

    before = triton_state()
    assert call(*CPU_USER)[0].startswith("IDENTICAL")  # a user's kernel: tl.max and masks, interpreted
    assert call(*CPU_TRITON)[0].startswith("IDENTICAL")
    after = triton_state()
    assert after["TRITON_INTERPRET"] == before["TRITON_INTERPRET"]
    for owner, attrs in before["attrs"].items():  # names the interpreter adds to rewritten functions' modules stay
        changed = sorted(k for k in attrs if attrs[k] is not after["attrs"][owner].get(k))
        assert changed == [], f"{owner}: {changed}"


@pytest.mark.interpreter
def test_cpu_runs_in_one_process_give_the_bytes_of_separate_processes():
    together = [call(*args) for args in (CPU_TRITON, CPU_USER, CPU_TRITON)]
    assert together[0] == together[2]
    assert together[:2] == [separate(*CPU_TRITON), separate(*CPU_USER)]


@pytest.mark.cuda
@pytest.mark.parametrize("order", [(CPU_TRITON, CUDA_TRITON, CPU_USER, CUDA_USER),
                                   (CUDA_TRITON, CPU_TRITON, CUDA_USER, CPU_USER)],
                         ids=["cpu-first", "cuda-first"])
def test_api_mixes_cpu_and_cuda_in_either_order(order):
    together = [call(*args) for args in order]
    assert together == [separate(*args) for args in order]
    for verdict, _ in together:
        assert verdict.startswith("IDENTICAL"), verdict


MIXED_GATE = """
[defaults]
num_blocks = 2
[[case]]
candidate = "triton"
baseline = "reference-vllm"
device = {first}
[[case]]
candidate = "triton"
baseline = "reference-vllm"
device = {second}
inputs = ["normal", "mixed"]
"""


@pytest.mark.cuda
@pytest.mark.parametrize("first, second", [("cpu", "cuda"), ("cuda", "cpu")])
def test_gate_mixes_cpu_and_cuda_cases_in_either_order(tmp_path, first, second):
    from fp8check.run import gate_config
    from fp8check.run.gate import run_gate
    from fp8check.core.outcome import Status

    path = tmp_path / "mixed.toml"
    path.write_text(MIXED_GATE.format(first=json.dumps(first), second=json.dumps(second)))
    cases = gate_config.load(path).cases
    together = run_gate(str(path), cases)
    assert [o.status for o in together.outcomes] == [Status.PASSED] * 3, [o.error for o in together.outcomes]
    alone = [run_gate(str(path), (case,)).outcomes[0] for case in cases]
    assert [o.exit_code for o in together.outcomes] == [o.exit_code for o in alone]
