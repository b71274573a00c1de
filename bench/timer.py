"""The one timer of the benchmarks: a call in this process, or a command as a fresh process.

Every figure is a `Timing` (seconds): the median and the fastest of its runs. On a CUDA device a call
is timed by `triton.testing.do_bench` (CUDA events around each call, the L2 cache flushed between
calls); on the CPU by `time.perf_counter` around each call after one untimed warm-up call.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Timing:
    median: float  # seconds
    best: float  # seconds
    runs: int


def of(samples: Sequence[float]) -> Timing:
    return Timing(statistics.median(samples), min(samples), len(samples))


def call(fn: Callable[[], object], *, repeat: int, cuda: bool = False) -> Timing:
    """fn()'s time in this process; `cuda`: fn launches work on the current CUDA device."""
    if cuda:
        import triton.testing

        # do_bench warms up for `warmup` ms, then times calls for about `rep` ms; each sample in ms
        samples = triton.testing.do_bench(fn, warmup=25, rep=max(100, 20 * repeat), return_mode="all")
        return of([ms / 1e3 for ms in samples])
    fn()  # warm-up: the first call imports, loads kernels and touches fresh memory
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return of(samples)


def process(argv: Sequence[str], *, repeat: int, cwd: Path, ok: frozenset[int] = frozenset({0}),
            warmup: int = 0) -> Timing:
    """The wall time of `python argv...` as a fresh process (interpreter start to exit, imports included).
    A run that exits with a code outside `ok` stops the benchmark with its output: a broken command has
    no speed."""
    samples = []
    for run in range(warmup + repeat):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode not in ok:
            raise SystemExit(f"`python {' '.join(argv)}` exited {done.returncode}:\n{done.stdout}{done.stderr}")
        if run >= warmup:
            samples.append(wall)
    return of(samples)
