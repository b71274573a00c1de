"""The one timer of the benchmarks: a call in this process, or a command as a fresh process.

Every figure is a `Timing` (seconds): the median and the fastest of its runs' wall times, and on the CPU
the median of their CPU times (all threads; a fresh process's user + system time), which other work on
the machine inflates far less than the wall time. On a CUDA device a call is timed by
`triton.testing.do_bench` (CUDA events around each call, the L2 cache flushed between calls); on the CPU
by `time.perf_counter` around each call after one untimed warm-up call.
"""

from __future__ import annotations

import resource
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
    cpu: float | None = None  # median CPU seconds; None on a CUDA device


def of(samples: Sequence[float], cpu: Sequence[float] | None = None) -> Timing:
    return Timing(statistics.median(samples), min(samples), len(samples), statistics.median(cpu) if cpu else None)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def call(fn: Callable[[], object], *, repeat: int, cuda: bool = False) -> Timing:
    """fn()'s time in this process; `cuda`: fn launches work on the current CUDA device. The CPU time is
    this process's only: a child process's is not counted."""
    if cuda:
        import triton.testing

        # do_bench warms up for `warmup` ms, then times calls for about `rep` ms; each sample in ms
        samples = triton.testing.do_bench(fn, warmup=25, rep=max(100, 20 * repeat), return_mode="all")
        return of([ms / 1e3 for ms in samples])
    fn()  # warm-up: the first call imports, loads kernels and touches fresh memory
    samples, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        samples.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return of(samples, cpu)


def process(argv: Sequence[str], *, repeat: int, cwd: Path, ok: frozenset[int] = frozenset({0}),
            warmup: int = 0) -> Timing:
    """The wall time of `python argv...` as a fresh process (interpreter start to exit, imports included).
    A run that exits with a code outside `ok` stops the benchmark with its output: a broken command has
    no speed."""
    samples, cpu = [], []
    for run in range(warmup + repeat):
        start, start_cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True)
        wall, used = time.perf_counter() - start, _children_cpu() - start_cpu
        if done.returncode not in ok:
            raise SystemExit(f"`python {' '.join(argv)}` exited {done.returncode}:\n{done.stdout}{done.stderr}")
        if run >= warmup:
            samples.append(wall)
            cpu.append(used)
    return of(samples, cpu)
