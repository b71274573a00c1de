"""`make bench`: where the time of `fp8check compare --block 64 --head-dim 128` goes, on this machine.

1. Whole command, as a user runs it (fresh process each time, imports included): median of N runs.
2. One in-process run split by stage: imports, inputs, baseline producer, candidate producer, diff,
   diagnosis, report rendering. The Triton interpreter's known-answer check runs once per process, inside the
   candidate's first run; it is timed on its own too.
A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import io
import os
import platform
import statistics
import subprocess
import sys
import time

ARGS = ["compare", "--block", "64", "--head-dim", "128"]
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5


def whole_command() -> list[float]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fp8check", *ARGS], stdout=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return times


def stages() -> dict[str, float]:
    out: dict[str, float] = {}
    start = time.perf_counter()
    import torch  # noqa: F401
    import triton  # noqa: F401

    from fp8check import producers, report
    from fp8check.compare import compare
    from fp8check.inputs import generate
    from fp8check.spec import CacheSpec, FP8Format
    from fp8check.triton_exact import check
    from rich.console import Console

    out["imports (torch, triton, fp8check)"] = time.perf_counter() - start

    start = time.perf_counter()
    check(FP8Format.E4M3FN)
    out["interpreter known-answer check (once per process)"] = time.perf_counter() - start

    start = time.perf_counter()
    spec = CacheSpec(num_blocks=3, block_size=64, head_dim=128)
    data = generate(spec, seed=0)
    out["inputs"] = time.perf_counter() - start

    result = compare(spec, baseline=producers.resolve("reference"), candidate=producers.resolve("triton"),
                     inputs=data, device=torch.device("cpu"))
    out["baseline: reference"] = result.timings["baseline"]
    out["candidate: triton (interpreter)"] = result.timings["candidate"]
    out["diff"] = result.timings["diff"]

    from fp8check.diagnose import diagnose

    start = time.perf_counter()
    diagnose(result.spec, result.baseline.buffer, result.candidate.buffer, result.inputs, diff=result.diff)
    out["diagnosis"] = time.perf_counter() - start

    start = time.perf_counter()
    Console(file=io.StringIO(), width=100).print(report.render_compare(result))
    out["report"] = time.perf_counter() - start
    return out


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    times = whole_command()
    print(f"`fp8check {' '.join(ARGS)}`: median {statistics.median(times):.2f} s over {RUNS} runs "
          f"(min {min(times):.2f}, max {max(times):.2f})")
    for name, seconds in stages().items():
        print(f"  {name:<52} {seconds * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
