"""The default `fp8check parity` sweep compiled on CUDA (run on the H200 by hand, not by `make bench`).

Run from the source tree: `PYTHONPATH=. python bench/gpu_parity.py`. It runs the seed's sweep (ctx
128..16384, triton-buggy and triton written by compiled Triton, truth from the baseline's bytes, the
reference reader in float64 on the GPU) twice in one process: the first run includes Triton's compile,
the second is the warm figure (goal: <= 2 s). Then the whole CLI command once, imports and CUDA context
included. Prints recall@2048 per row and the wall times as short tables.
"""

from __future__ import annotations

import subprocess
import sys
import time

import torch

from fp8check import parity
from fp8check.readers import registry as readers
from fp8check.spec import CacheSpec
from fp8check.writers import registry as producers


def sweep(device: torch.device):
    config = parity.ParityConfig(expect_fail=frozenset({"triton-buggy"}))
    spec = CacheSpec(num_blocks=-(-config.max_ctx // 64))
    inputs = parity.generate(spec, config, heads=parity.DEFAULT_HEADS, seed=0, shuffled=False)
    start = time.perf_counter()
    result = parity.run_parity(
        spec, config, baseline=producers.resolve("auto"),
        writers=[producers.resolve(name) for name in parity.DEFAULT_WRITERS],
        reader=readers.resolve("reference", spec=spec), inputs=inputs, device=device,
    )
    if device.type == "cuda":
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def main() -> None:
    device = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cuda")  # `cpu`: a dry run of this script
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}")
    (cold, cold_s), (warm, warm_s) = sweep(device), sweep(device)
    print(f"{'ctx':>6} | {'triton-buggy recall':>19} | {'positional':>10} | {'triton recall':>13} | {'max_rel':>8}"
          " | vacuous")
    buggy, fixed = warm.columns
    for ctx, b, f in zip(warm.config.ctx, buggy.rows, fixed.rows):
        print(f"{ctx:>6} | {b.recall:>19.4f} | {b.positional:>10.3f} | {f.recall:>13.4f} | {f.max_rel:>8.1e}"
              f" | {'vacuous' if b.vacuous else ''}")
    same = [(b1.recall, f1.recall) == (b2.recall, f2.recall)
            for b1, f1, b2, f2 in zip(cold.columns[0].rows, cold.columns[1].rows, buggy.rows, fixed.rows)]
    print(f"passed: {warm.passed}; cold and warm runs give the same recall: {all(same)}")
    print(f"sweep wall time: cold (compiles) {cold_s:.2f} s, warm {warm_s:.2f} s")
    for stage, seconds in warm.timings.items():
        print(f"  {stage:<55} {seconds * 1000:9.1f} ms")
    start = time.perf_counter()
    command = ["parity", "--device", device.type, "--expect-fail", "triton-buggy"]
    done = subprocess.run([sys.executable, "-m", "fp8check", *command], capture_output=True, text=True, check=False)
    print(f"whole command `fp8check {' '.join(command)}`: {time.perf_counter() - start:.2f} s, exit {done.returncode}")


if __name__ == "__main__":
    main()
