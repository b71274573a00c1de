"""`make bench`: Triton kernels on the CPU, grid-at-once beside Triton's sequential interpreter.

Reproduce: `python bench/interpreter.py` (add `--sequential-tokens 1024` for a shorter sequential run;
its cost is per program, so tokens/s hardly depends on the count). vLLM 0.33.0's kernels are measured
when its ops file lies in .cache/vllm-0.33.0 (`make vllm-wheel-table` fetches it) or is given with
`--vllm-ops PATH`.

Writers: tokens per second at TOKENS tokens, best of REPEATS, both runs inside fp8check's CPU kernel
scope (`cpu_kernels()`, the exact FP8 conversion); the bytes of the two runs must be identical (the
sequential run on `--sequential-tokens` tokens, compared with a grid-at-once run of the same tokens). Reader:
`rocm_fp8_paged_mqa_logits_triton` at one row of CTX tokens, seconds per read, logits identical (the
tests' stand-in reader, one program per position, at ctx 1024).
A benchmark, not a test: it prints numbers and asserts nothing beyond the identity it reports.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OPS_FILE = "vllm/v1/attention/ops/rocm_aiter_mla_sparse.py"
UPSTREAM = ROOT / ".cache" / "vllm-0.33.0" / OPS_FILE
TEST_OPS = ROOT / "tests" / "kernels" / "rocm_indexer_ops.py"
TOKENS = 16384
CTX = 16384
REPEATS = 3


@dataclass(frozen=True)
class Writer:
    label: str
    name: str  # a producer name


def writers(upstream: Path | None) -> list[Writer]:
    rows = [Writer("tests/kernels vLLM-style writer (1 program/token)", f"vllm-file:{TEST_OPS}"),
            Writer("fp8check triton writer (256 tokens/program)", "triton")]
    if upstream is not None:
        rows.insert(0, Writer("vLLM 0.33.0 indexer_k_quant_and_cache_triton (1 program/token)", f"vllm-file:{upstream}"))
    return rows


CLOCKS = {"wall": time.perf_counter, "process": time.process_time}  # process: this process's CPU seconds
CLOCK = ["wall"]


def best_of(fn, repeats: int) -> tuple[float, object]:
    """(best seconds on the chosen clock, last result)."""
    clock = CLOCKS[CLOCK[0]]
    times, result = [], None
    for _ in range(repeats):
        start = clock()
        result = fn()
        times.append(clock() - start)
    return min(times), result


def bench_writer(writer: Writer, tokens: int, sequential_tokens: int) -> tuple[float, float, bool]:
    import torch

    from fp8check.core.inputs import generate
    from fp8check.core.spec import CacheSpec
    from fp8check.producers import registry
    from fp8check.triton_cpu.grid import grid_at_once
    from fp8check.triton_cpu.interpreter import cpu_kernels

    cpu = torch.device("cpu")
    producer = registry.resolve(writer.name, isolation=None)
    kwargs = {"fp8_dtype": torch.float8_e4m3fn} if "fp8_dtype" in producer.keywords else {}

    def run(spec, data, at_once: bool):
        producer.check(spec, cpu)
        cache = torch.full((spec.num_blocks, spec.block_size, spec.head_dim + 4), 0x5B, dtype=torch.uint8)
        k, slots = data.k.clone(), data.slot_mapping.clone()
        with cpu_kernels(), (grid_at_once() if at_once else contextlib.nullcontext()):
            producer.writer(k, cache, slots, spec.quant_block_size, spec.scale_fmt.writer_arg, **kwargs)
        return cache

    large = CacheSpec(num_blocks=tokens // 64, block_size=64, head_dim=128)
    small = CacheSpec(num_blocks=sequential_tokens // 64, block_size=64, head_dim=128)
    data = generate(large, seed=0)
    data_small = generate(small, seed=0)
    run(small, data_small, True)  # warm-up: the kernel's rewrite, the known-answer checks
    grid_s, grid_cache = best_of(lambda: run(large, data, True), REPEATS)
    small_grid = run(small, data_small, True)
    sequential_s, small_sequential = best_of(lambda: run(small, data_small, False), 1 if sequential_tokens > 2048 else REPEATS)
    same = torch.equal(small_grid, small_sequential)
    if sequential_tokens == tokens:
        same = same and torch.equal(grid_cache, small_sequential)
    return tokens / grid_s, sequential_tokens / sequential_s, same


def bench_reader(ops: Path, ctx: int) -> tuple[float, float, bool]:
    import torch

    from fp8check.producers import registry
    from fp8check.core.spec import CacheSpec
    from fp8check.triton_cpu.grid import grid_at_once
    from fp8check.triton_cpu.interpreter import cpu_kernels

    heads, head_dim, block_size = 64, 128, 64
    blocks = -(-ctx // block_size)
    spec = CacheSpec(num_blocks=blocks, block_size=block_size, head_dim=head_dim)
    reader = registry.resolve_reader(f"vllm-file:{ops}:rocm_fp8_paged_mqa_logits_triton", spec=spec, isolation=None)
    reader.check(spec, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    q = (torch.randn(1, 1, heads, head_dim, generator=g) * 2).to(torch.float8_e4m3fn)
    kv = torch.randint(0, 256, (blocks, block_size, head_dim + 4), dtype=torch.uint8, generator=g)
    flat = kv.view(blocks, -1)
    flat[:, : block_size * head_dim] &= 0x77  # finite FP8 codes only
    flat[:, block_size * head_dim:].view(torch.float32).copy_(torch.rand(blocks, block_size, generator=g) + 0.5)
    args = (q, kv, torch.randn(1, heads, generator=g), torch.tensor([ctx], dtype=torch.int32),
            torch.randperm(blocks, generator=g).to(torch.int32).view(1, -1))

    def read(at_once: bool):
        copies = [t.clone() for t in args]
        with cpu_kernels(), (grid_at_once() if at_once else contextlib.nullcontext()):
            return reader.fn(*copies, ctx)

    read(True)  # warm-up
    grid_s, grid_logits = best_of(lambda: read(True), REPEATS)
    sequential_s, sequential_logits = best_of(lambda: read(False), 1)
    same = torch.equal(grid_logits.view(torch.int32), sequential_logits.view(torch.int32))
    return grid_s, sequential_s, same


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=TOKENS)
    parser.add_argument("--sequential-tokens", type=int, default=None, help="tokens of the sequential run (default: --tokens)")
    parser.add_argument("--ctx", type=int, default=CTX)
    parser.add_argument("--vllm-ops", type=Path, default=UPSTREAM if UPSTREAM.is_file() else None)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="process: CPU seconds of this process, less disturbed by other work on a shared machine")
    options = parser.parse_args(argv)
    CLOCK[0] = options.clock
    sequential_tokens = options.sequential_tokens or options.tokens

    import torch
    import triton

    print(f"# Triton kernels on the CPU: grid-at-once vs sequential interpreter ({platform.machine()},"
          f" {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}, torch {torch.__version__},"
          f" Triton {triton.__version__})")
    print(f"# python bench/interpreter.py --tokens {options.tokens} --sequential-tokens {sequential_tokens}"
          f" --ctx {options.ctx} --clock {options.clock}" + (f" --vllm-ops {options.vllm_ops}" if options.vllm_ops else ""))
    print(f"| writer | grid-at-once tokens/s ({options.tokens} tokens, best of {REPEATS}) |"
          f" sequential tokens/s ({sequential_tokens} tokens) | speed-up | bytes identical |")
    print("|---|---:|---:|---:|---|")
    for writer in writers(options.vllm_ops):
        at_once, sequential, same = bench_writer(writer, options.tokens, sequential_tokens)
        print(f"| {writer.label} | {at_once:,.0f} | {sequential:,.0f} | {at_once / sequential:.1f}x | {same} |")
    print(f"\n| reader (ctx {options.ctx}, 1 row, 64 heads) | grid-at-once s/read (best of {REPEATS}) |"
          " sequential s/read | speed-up | logits identical |")
    print("|---|---:|---:|---:|---|")
    # the tests' stand-in reader runs one program per (row, position): its sequential run is timed at ctx 1024
    readers = [(f"tests/kernels vLLM-style reader, ctx {min(options.ctx, 1024)}", TEST_OPS, min(options.ctx, 1024))]
    if options.vllm_ops is not None:
        readers.insert(0, ("vLLM 0.33.0 rocm_fp8_paged_mqa_logits_triton", options.vllm_ops, options.ctx))
    for label, ops, ctx in readers:
        at_once, sequential, same = bench_reader(ops, ctx)
        print(f"| {label} | {at_once:.3f} | {sequential:.3f} | {sequential / at_once:.1f}x | {same} |")


if __name__ == "__main__":
    main()
