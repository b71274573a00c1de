"""`make bench`: what one Triton program costs in the exact CPU interpreter, and a whole vllm-file run.

1. In process (interpreter mode on before Triton is imported, exact FP8 conversion installed): the
   vLLM-style one-program-per-token writer of tests/kernels/rocm_indexer_ops.py, loaded through
   `vllm-file:`, on caches of growing size; ms per program and tokens per second (median of REPEATS).
   fp8check's own `triton` writer (256 tokens per program) on the same caches, for comparison.
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
NUM_BLOCKS = (1, 2, 4, 8)  # block 64: 64 .. 512 programs for the one-program-per-token writer
REPEATS = 3
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def per_program() -> list[tuple[str, int, int, float]]:
    from fp8check.writers.interpreter import prepare_cpu

    prepare_cpu()  # before anything imports Triton, as the CLI does on the CPU
    import torch

    from fp8check.inputs import generate
    from fp8check.spec import CacheSpec
    from fp8check.writers import triton as own
    from fp8check.writers.registry import resolve, run

    cpu = torch.device("cpu")
    rows = []
    for name in (WRITER, "triton"):
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
            programs = tokens if name == WRITER else -(-tokens // own.TOKENS_PER_PROGRAM["cpu"])
            rows.append((name if name == "triton" else "vllm-file (1 program/token)", tokens, programs,
                         statistics.median(times)))
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
    print("| writer | tokens | programs | median s | ms / program | tokens / s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, tokens, programs, seconds in per_program():
        print(f"| {name} | {tokens} | {programs} | {seconds:.3f} | {1000 * seconds / programs:.2f} |"
              f" {tokens / seconds:.0f} |")
    times = whole_command()
    print(f"\nwhole `compare --candidate vllm-file:... --num-blocks 16` (1024 programs), fresh process, no env var:"
          f" median {statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f}, {RUNS} runs)")


if __name__ == "__main__":
    main()
