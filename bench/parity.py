"""`make bench`: the default `fp8check parity` sweep on this machine (goal: <= 15 s wall on the 2-core CPU).

1. Whole command, as a user runs it (fresh process, imports included): median of N runs.
2. One in-process run split by stage: imports, inputs, each writer on max(ctx) tokens, the truth, each
   reader call (the stages `run_parity` times itself), and rendering.
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

ARGS = ["parity"]  # the defaults: ctx 128..16384, writers triton-buggy,triton, 64 heads, top-2048
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def whole_command() -> list[float]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fp8check", *ARGS], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return times


def stages() -> dict[str, float]:
    out: dict[str, float] = {}
    # imports
    start = time.perf_counter()
    import torch
    from rich.console import Console

    from fp8check import parity
    from fp8check.readers import registry as readers
    from fp8check.report import parity as report
    from fp8check.spec import CacheSpec
    from fp8check.writers import registry as producers

    out["imports (torch, fp8check)"] = time.perf_counter() - start
    # inputs
    start = time.perf_counter()
    config = parity.ParityConfig()
    spec = CacheSpec(num_blocks=-(-config.max_ctx // 64))
    inputs = parity.generate(spec, config, heads=parity.DEFAULT_HEADS, seed=0, shuffled=False)
    out["inputs (K, q, weights)"] = time.perf_counter() - start
    # the sweep, timed stage by stage by run_parity itself
    result = parity.run_parity(
        spec, config, baseline=producers.resolve("auto"),
        writers=[producers.resolve(name) for name in parity.DEFAULT_WRITERS],
        reader=readers.resolve("reference", spec=spec), inputs=inputs, device=torch.device("cpu"),
    )
    out.update(result.timings)
    # rendering
    start = time.perf_counter()
    Console(file=io.StringIO(), width=120).print(report.render(result))
    out["report"] = time.perf_counter() - start
    return out


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    times = whole_command()
    print(f"fp8check {' '.join(ARGS)} (default sweep), {RUNS} fresh processes: median {statistics.median(times):.2f} s"
          f" (min {min(times):.2f}, max {max(times):.2f})")
    for name, seconds in stages().items():
        print(f"  {name:<55} {seconds * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
