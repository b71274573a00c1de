"""Isolation children start from fp8check's own entry point: a user's script without an
`if __name__ == "__main__":` guard runs its body once, however many writers from files it compares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
# the fresh interpreter CUDA tensors need, here on CPU tensors
spec = CacheSpec(num_blocks=2, block_size=64, head_dim=128, quant_block_size=128)
data = inputs.generate(spec, seed=0)
cache = torch.zeros(4 * spec.block_bytes, dtype=torch.uint8)
run_isolated("fp8check.producers.registry:run_in_child",
             (name, spec.to_json(), None, data.k.clone(), data.slot_mapping.clone(), cache),
             limits=Limits(timeout_s=120), label="fresh", start_method="spawn")
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
