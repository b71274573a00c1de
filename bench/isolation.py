"""`make bench`: what isolating writers from files costs, and the peak memory of a compare.

1. Overhead per isolated producer: `registry.run` of a writer from a file (tests/plugins/corrupt_one_byte.py:
   the aiter reference plus one flipped byte) in a child process against the same writer in this process,
   at the default spec (3 blocks) and at 4000 blocks (34 MB caches). Median of N runs after one warm-up;
   the parent is warm (torch and fp8check imported), so the child is a fork. Target: <= 0.3 s. A forked
   child computes on one thread (libgomp cannot run its pool after a fork), so the writer's own work is
   also timed in this process on one thread: the overhead proper is isolated minus that.
2. Peak memory of a compare (baseline `reference`, candidate the file writer, isolated; then the
   in-process emulations reference vs reference-vllm) at 4000 and 8000 blocks, each in a fresh process:
   the growth of its resident set (VmHWM after resetting it, minus VmRSS before) over the bytes of the two
   poisoned caches plus the inputs. Target: <= 3x. The shared-memory cache a child writes is counted
   in the parent's resident set when the parent copies it out.
A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WRITER = f"file:{ROOT / 'tests' / 'plugins' / 'corrupt_one_byte.py'}:writer"
RUNS = 7


def overhead(num_blocks: int) -> tuple[float, float]:
    """(median seconds in this process, median seconds isolated) of one producer run."""
    import torch

    from fp8check.inputs import generate
    from fp8check.spec import CacheSpec
    from fp8check.writers import registry

    spec = CacheSpec(num_blocks=num_blocks, block_size=64, head_dim=128)
    data = generate(spec, seed=0)
    times: dict[str, list[float]] = {"in-process": [], "in-process, 1 thread": [], "isolated": []}
    threads = torch.get_num_threads()
    for mode, isolation in (("in-process", None), ("in-process, 1 thread", None),
                            ("isolated", registry.DEFAULT_ISOLATION)):
        torch.set_num_threads(1 if mode == "in-process, 1 thread" else threads)
        producer = registry.resolve(WRITER, isolation=isolation)
        registry.run(producer, spec, data, torch.device("cpu"))  # warm-up: imports, first touch of memory
        for _ in range(RUNS):
            start = time.perf_counter()
            registry.run(producer, spec, data, torch.device("cpu"))
            times[mode].append(time.perf_counter() - start)
    torch.set_num_threads(threads)
    return tuple(statistics.median(t) for t in times.values())


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def peak_of_one_compare(num_blocks: int, candidate: str) -> dict:
    """Run in a fresh process: the resident-set growth of one compare() over its caches and inputs."""
    import torch

    from fp8check.cache import buffer_bytes
    from fp8check.compare import compare
    from fp8check.inputs import generate
    from fp8check.spec import CacheSpec
    from fp8check.writers import registry

    spec = CacheSpec(num_blocks=num_blocks, block_size=64, head_dim=128)
    data = generate(spec, seed=0)
    baseline, cand = registry.resolve("reference"), registry.resolve(candidate)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status("VmRSS")
    result = compare(spec, baseline=baseline, candidate=cand, inputs=data, device=torch.device("cpu"))
    peak = _status("VmHWM") - before
    caches = 2 * buffer_bytes(spec)
    data_bytes = data.k.numel() * data.k.element_size() + data.slot_mapping.numel() * 8
    return {"blocks": num_blocks, "candidate": candidate.split("/")[-1], "diff_bytes": result.diff.diff_bytes,
            "caches_mb": caches / 1e6, "inputs_mb": data_bytes / 1e6, "peak_growth_mb": peak / 1e6,
            "ratio": peak / (caches + data_bytes)}


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--peak":
        print(json.dumps(peak_of_one_compare(int(sys.argv[2]), sys.argv[3])))
        return
    print(f"# isolation bench, {platform.node()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}")
    print("\n## overhead per isolated producer (fork of a warm parent), median of", RUNS)
    print(f"{'blocks':>7} {'in-process s':>13} {'1 thread s':>11} {'isolated s':>11} {'overhead s':>11}"
          f" {'vs 1 thread s':>14}")
    for num_blocks in (3, 4000):
        here, one_thread, isolated = overhead(num_blocks)
        print(f"{num_blocks:>7} {here:>13.3f} {one_thread:>11.3f} {isolated:>11.3f} {isolated - here:>11.3f}"
              f" {isolated - one_thread:>14.3f}")
    print("\n## peak memory of one compare (fresh process each)")
    print(f"{'blocks':>7} {'candidate':>26} {'caches MB':>10} {'inputs MB':>10} {'peak growth MB':>15} {'ratio':>6}")
    for num_blocks in (4000, 8000):
        for candidate in (WRITER, "reference-vllm"):
            done = subprocess.run([sys.executable, __file__, "--peak", str(num_blocks), candidate],
                                  capture_output=True, text=True, check=True)
            row = json.loads(done.stdout)
            print(f"{row['blocks']:>7} {row['candidate']:>26} {row['caches_mb']:>10.1f} {row['inputs_mb']:>10.1f}"
                  f" {row['peak_growth_mb']:>15.1f} {row['ratio']:>6.2f}")


if __name__ == "__main__":
    main()
