"""`make bench`: what running a reader from a file in a child process costs (issue 10, readers).

`readers.run_reader` of tests/readers/linear_reader.py (row-major, fp32, a Python loop over the rows) in a
forked child against the same reader in this process (on all threads, and on one thread: a forked child
computes on one, as bench/isolation.py explains), on the reference writer's bytes, at two parity sweeps:
tests' small one (4 heads, ctx 20,64,200) and the default one (64 heads, ctx 128..16384). Median of N runs
after one warm-up; the parent is warm (torch and fp8check imported), so each child is a fork. A parity
sweep runs the reader once per writer plus once on the baseline's bytes: each is one child.
A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
READER = f"file:{ROOT / 'tests' / 'readers' / 'linear_reader.py'}:paged_mqa_logits"
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 7


def reader_args(ctx: tuple[int, ...], heads: int):
    import torch

    from fp8check import parity
    from fp8check.inputs import Inputs
    from fp8check.spec import FP8Format, ScaleFormat
    from fp8check.writers import registry as producers

    cpu = torch.device("cpu")
    config = parity.ParityConfig(ctx=ctx, topk=32)
    spec = parity.cache_spec(config, block_size=64, head_dim=128, quant_block_size=None, fp8=FP8Format.E4M3FN,
                             scale_fmt=ScaleFormat.UE8M0, layout=None)
    data = parity.generate(spec, config, heads=heads, seed=0, shuffled=False)
    written = Inputs(data.k, data.slot_mapping(config.max_ctx, spec.block_size), data.source)
    cache = producers.run(producers.resolve("reference"), spec, written, cpu)
    batch = parity.make_batch(spec, config, data, cpu)
    kv = cache.cache.view(spec.num_blocks, spec.block_size, 1, spec.row_bytes)
    return spec, (batch.q_fp8, kv, batch.weights, batch.context_lens, batch.block_tables, batch.max_model_len)


def medians(ctx: tuple[int, ...], heads: int) -> list[float]:
    """Median seconds of one run_reader: in this process, in this process on 1 thread, isolated."""
    import torch

    from fp8check.readers import registry as readers
    from fp8check.writers.registry import DEFAULT_ISOLATION

    spec, args = reader_args(ctx, heads)
    threads, out = torch.get_num_threads(), []
    for one_thread, isolation in ((False, None), (True, None), (False, DEFAULT_ISOLATION)):
        torch.set_num_threads(1 if one_thread else threads)
        reader = readers.resolve(READER, spec=spec, isolation=isolation)
        readers.run_reader(reader, *args)  # warm-up
        times = []
        for _ in range(RUNS):
            start = time.perf_counter()
            readers.run_reader(reader, *args)
            times.append(time.perf_counter() - start)
        out.append(statistics.median(times))
    torch.set_num_threads(threads)
    return out


def main() -> None:
    print(f"# reader isolation bench, {platform.node()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}")
    print(f"## one run_reader of the linear reader, median of {RUNS}")
    print(f"{'sweep':>34} {'in-process s':>13} {'1 thread s':>11} {'isolated s':>11} {'vs 1 thread s':>14}")
    for label, ctx, heads in (("4 heads, ctx 20,64,200", (20, 64, 200), 4),
                              ("64 heads, ctx 128..16384 (default)", (128, 512, 1024, 2048, 2049, 4096, 8192, 16384),
                               64)):
        here, one, isolated = medians(ctx, heads)
        print(f"{label:>34} {here:>13.3f} {one:>11.3f} {isolated:>11.3f} {isolated - one:>14.3f}")


if __name__ == "__main__":
    main()
