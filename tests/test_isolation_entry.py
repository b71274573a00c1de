"""Isolation children start from fp8check's own entry point: a user's script without an
`if __name__ == "__main__":` guard runs its body once, however many writers from files it compares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fp8check.core import inputs
from fp8check.core.isolation import IsolatedError, Limits, _ServedChild, run_isolated
from fp8check.core.spec import CacheSpec

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "tests" / "plugins" / "corrupt_one_byte.py"

SCRIPT = f"""
import torch
import fp8check
from fp8check.core.isolation import Limits, run_isolated
from fp8check.core.spec import CacheSpec
from fp8check.core import inputs

print("BODY RAN", flush=True)
name = "file:{WRITER}:writer"
for _ in range(2):
    result = fp8check.compare_writers(name, "reference", device="cpu", num_blocks=2)
    print("cpu", result.passed, flush=True)
# the start server CUDA tensors need, here on CPU tensors
spec = CacheSpec(num_blocks=2, block_size=64, head_dim=128, quant_block_size=128)
data = inputs.generate(spec, seed=0)
cache = torch.zeros(4 * spec.block_bytes, dtype=torch.uint8)
run_isolated("fp8check.producers.registry:run_in_child",
             (name, spec.to_json(), None, data.k.clone(), data.slot_mapping.clone(), cache),
             limits=Limits(timeout_s=120), label="fresh", start_method="server")
print("fresh child ran", flush=True)
if torch.cuda.is_available():
    print("cuda", fp8check.compare_writers(name, "reference", device="cuda", num_blocks=2).passed, flush=True)
"""


def test_a_script_without_a_main_guard_runs_its_body_once(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines.count("BODY RAN") == 1
    assert lines[1:4] == ["cpu False", "cpu False", "fresh child ran"]  # the writer corrupts one byte


def _served(name: str, timeout_s: float = 120):
    """One run of writer `name` in a child of the start server (the path CUDA tensors take), on the CPU."""
    spec = CacheSpec(num_blocks=2, block_size=64, head_dim=128, quant_block_size=128)
    data = inputs.generate(spec, seed=0)
    cache = torch.zeros(4 * spec.block_bytes, dtype=torch.uint8)
    run_isolated("fp8check.producers.registry:run_in_child",
                 (name, spec.to_json(), None, data.k.clone(), data.slot_mapping.clone(), cache),
                 limits=Limits(timeout_s=timeout_s), label=f"producer {name!r}", start_method="server")
    return cache


def test_served_children_are_forks_of_one_server_and_fail_in_one_line(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("FP8CHECK_TEST_PID_FILE", str(pids))
    recorder = f"file:{ROOT / 'tests' / 'plugins' / 'records_pid.py'}:writer"
    first = _served(recorder)
    server = _ServedChild._server[0].pid
    hostile = ROOT / "tests" / "hostile"
    with pytest.raises(IsolatedError, match=r"crashed \(SIGSEGV\) while writing$"):
        _served(f"file:{hostile / 'crashes.py'}:segfault")
    with pytest.raises(IsolatedError, match=r"did not finish within the 2 s timeout \(--timeout\) while writing: killed"):
        _served(f"file:{hostile / 'hangs.py'}:sleeps", timeout_s=2)
    with pytest.raises(IsolatedError, match=r"called sys.exit\(1\) while writing, before returning"):
        _served(f"file:{hostile / 'exits.py'}:exit1")
    assert torch.equal(_served(recorder), first)  # the server answers in order after a crash and a kill
    children = [int(line) for line in pids.read_text().split()]
    assert _ServedChild._server[0].pid == server and len(set(children)) == 2
    assert os.getpid() not in children and server not in children


def test_a_server_that_died_is_started_again(monkeypatch):
    name = f"file:{WRITER}:writer"
    _served(name)
    server, channel = _ServedChild._server
    server.kill()
    server.wait()
    _served(name)  # a new server: the dead one's socket is not reused
    assert _ServedChild._server[0].pid != server.pid and _ServedChild._server[1] is not channel


def test_a_served_child_prints_to_the_stderr_its_parent_has_now(tmp_path):
    printer = f"file:{ROOT / 'tests' / 'hostile' / 'prints_a_verdict.py'}:writer"
    _served(printer)  # the server is running, with the stderr it was started with
    now = tmp_path / "stderr"
    saved = os.dup(2)
    try:
        with now.open("wb") as redirected:
            os.dup2(redirected.fileno(), 2)
            _served(printer)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert now.read_text().splitlines() == ["IDENTICAL: 0 of 2176 bytes differ in 2 blocks"]
