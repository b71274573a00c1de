"""The CUDA slot check (slots_kernel.py) against torch's counts on the CPU, on a GPU (run on the H200):

    PYTHONPATH=. python3 bench/gpu_slots.py

Mappings of 1M tokens: sequential, shuffled, a quarter padding, other negative values, one slot twice
(first and last token), one slot outside the cache, and all padding; then check_slots' verdict (its
error line, or none) on the GPU and on the CPU for each. Prints one line per case and a last line
"slot kernel: N cases, M disagree".
"""

from __future__ import annotations

import torch

from fp8check import inputs, slots_kernel
from fp8check.errors import InputError
from fp8check.spec import CacheSpec

spec = CacheSpec(num_blocks=16384, block_size=64, head_dim=128)
n = spec.num_slots
g = torch.Generator().manual_seed(13)
shuffled = torch.randperm(n, generator=g)
padded = shuffled.clone()
padded[torch.randperm(n, generator=g)[: n // 4]] = -1
negative = padded.clone()
negative[::5] = -3
twice = shuffled.clone()
twice[-1] = twice[0]
outside = shuffled.clone()
outside[n // 2] = n + 7
cases = {"sequential": torch.arange(n), "shuffled": shuffled, "padded": padded, "other negatives": negative,
         "one slot twice": twice, "outside": outside, "all padding": torch.full((n,), -1)}


def verdict(slots: torch.Tensor) -> str:
    try:
        inputs.check_slots(spec, slots, "case")
    except InputError as exc:
        return str(exc)
    return "ok"


bad = 0
for name, slots in cases.items():
    gpu = slots_kernel.counts(slots.cuda(), n)
    cpu = inputs.slot_numbers(slots, n)
    same = gpu[0] == cpu[0] and gpu[2] == cpu[2] and (gpu[1] == cpu[1] or not cpu[0])
    said_gpu, said_cpu = verdict(slots.cuda()), verdict(slots)
    ok = same and said_gpu == said_cpu
    bad += not ok
    print(f"{name:<16} gpu {gpu} cpu {cpu} verdict {'same' if said_gpu == said_cpu else 'DIFFERENT'}: {said_gpu[:70]}")
print(f"slot kernel: {len(cases)} cases, {bad} disagree")
