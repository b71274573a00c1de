"""The one-pass diff on the H200 after the summary program (run by hand: `PYTHONPATH=. python3 bench/gpu_diff.py`).

Proves the CUDA diff's counts, guard count and first mismatch equal torch's on 1M tokens, then times the
stages of `make bench` on CUDA (median of 10, CUDA events; stages.in_process) and prints them last.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stages  # noqa: E402

from fp8check import inputs  # noqa: E402
from fp8check.cache import CacheBuffer  # noqa: E402
from fp8check.diff import count_true, diff_caches  # noqa: E402
from fp8check.spec import CacheSpec  # noqa: E402
from fp8check.writers import registry  # noqa: E402

CUDA = torch.device("cuda")


def proofs() -> list[str]:
    spec = CacheSpec(num_blocks=16384, block_size=64, head_dim=128)
    data = inputs.generate(spec, seed=3, distribution=inputs.Distribution.HASHED, device=CUDA)
    base = registry.run(registry.resolve("reference"), spec, data, CUDA)
    cases = {"identical": registry.run(registry.resolve("triton"), spec, data, CUDA),
             "seed bug": registry.run(registry.resolve("triton-buggy"), spec, data, CUDA)}
    flipped = CacheBuffer(spec, base.buffer.clone())
    g = torch.Generator(device=CUDA).manual_seed(0)
    flipped.flat.view(-1)[torch.randint(0, flipped.flat.numel(), (100_000,), device=CUDA, generator=g)] ^= 0x21
    flipped.buffer[[3, flipped.buffer.numel() - 5]] ^= 1  # one byte in each guard zone
    cases["100k flips + 2 guard bytes"] = flipped
    lines = []
    for name, other in cases.items():
        d = diff_caches(spec, base, other)
        differs = base.flat != other.flat
        flat = differs.view(-1).nonzero()
        first = int(flat[0]) if flat.numel() else None
        got = None if d.first_mismatch is None else (d.first_mismatch.coordinate.block * spec.block_bytes
                                                     + d.first_mismatch.coordinate.byte_in_block)
        ok = (torch.equal(d.value_diff, count_true(differs[:, : spec.value_bytes]))
              and torch.equal(d.scale_diff, count_true(differs[:, spec.value_bytes:]))
              and d.cache_diff == int(differs.sum()) and got == first
              and d.guard_diff == int((base.guards != other.guards).sum()))
        lines.append(f"{name}: {d.cache_diff} bytes, {d.guard_diff} guard bytes, first {got}: "
                     f"{'equal to torch' if ok else 'DIFFERENT FROM TORCH'}")
    return lines


if __name__ == "__main__":
    for line in proofs():
        print(line)
    columns = {"cuda": stages.in_process("cuda", 16384, 10)}
    print(stages.table(columns, {"cuda": "1,048,576 tokens, H200"}))
