"""`make bench`: what one Triton program costs in the exact CPU interpreter, and a whole vllm-file run.

1. In process (kernels on CPU tensors in the exact interpreter): the
   vLLM-style one-program-per-token writer of tests/kernels/rocm_indexer_ops.py, loaded through
   `vllm-file:`, on caches of growing size; ms per program and tokens per second (best and median of
   REPEATS: the machine is shared, the best is the cost). fp8check's own `triton` writer (256 tokens per
   program) on the same caches, for comparison, and vLLM 0.33.0's writer when `make vllm-wheel-table`
   has fetched it.
2. The whole command a user runs, `fp8check compare --candidate vllm-file:... --num-blocks 16`, in a
   fresh process with no environment variable set (median of RUNS).
A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WRITER = f"vllm-file:{ROOT / 'tests' / 'kernels' / 'rocm_indexer_ops.py'}"
# vLLM 0.33.0's own writer, when `make vllm-wheel-table` has fetched it
UPSTREAM = ROOT / ".cache" / "vllm-0.33.0" / "vllm" / "v1" / "attention" / "ops" / "rocm_aiter_mla_sparse.py"
NUM_BLOCKS = (1, 2, 4, 8)  # block 64: 64 .. 512 programs for the one-program-per-token writer
REPEATS = 3
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def per_program() -> list[tuple[str, int, int, float, float]]:
    import torch

    from fp8check.inputs import generate
    from fp8check.spec import CacheSpec
    from fp8check.writers import triton as own
    from fp8check.writers.registry import resolve, run

    cpu = torch.device("cpu")
    rows = []
    writers = {"vllm-file, tests/kernels (1 program/token)": WRITER, "triton (256 tokens/program)": "triton"}
    if UPSTREAM.is_file():
        writers["vllm-file, vLLM 0.33.0 (1 program/token)"] = f"vllm-file:{UPSTREAM}"
    for label, name in writers.items():
        producer = resolve(name)
        for num_blocks in NUM_BLOCKS:
            spec = CacheSpec(num_blocks=num_blocks, block_size=64, head_dim=128)
            data = generate(spec, seed=0)
            run(producer, spec, data, cpu)  # warm-up: rewrite of the kernel's AST, known-answer checks
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                run(producer, spec, data, cpu)
                times.append(time.perf_counter() - start)
            tokens = spec.num_slots
            programs = -(-tokens // own.TOKENS_PER_PROGRAM["cpu"]) if name == "triton" else tokens
            rows.append((label, tokens, programs, min(times), statistics.median(times)))
    return rows


def whole_command() -> list[float]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fp8check", "compare", "--baseline", "reference", "--candidate",
                        WRITER, "--num-blocks", "16"], stdout=subprocess.DEVNULL, env=env, check=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    print(f"# Triton interpreter cost, {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"| writer | tokens | programs | best of {REPEATS} s | median s | ms / program (best) | tokens / s (best) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, tokens, programs, best, median in per_program():
        print(f"| {name} | {tokens} | {programs} | {best:.3f} | {median:.3f} | {1000 * best / programs:.2f} |"
              f" {tokens / best:.0f} |")
    times = whole_command()
    print(f"\nwhole `compare --candidate vllm-file:... --num-blocks 16` (1024 programs), fresh process, no env var:"
          f" median {statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f}, {RUNS} runs)")


if __name__ == "__main__":
    main()
