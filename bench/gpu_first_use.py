"""First-use cost of torch CUDA ops in a fresh process (a GPU loads an op's kernels at its first use):
the ops a `compare` runs, each timed at its first call and again, in a fresh process per loading mode.

    PYTHONPATH=. python3 bench/gpu_first_use.py      (prints a table: ms of the first and second call)
"""

from __future__ import annotations

import os
import subprocess
import sys

CHILD = r"""
import os, time, torch
from fp8check.spec import CacheSpec
from fp8check import inputs
spec = CacheSpec(num_blocks=16384, block_size=64, head_dim=128)
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
n = spec.num_slots
slots = torch.arange(n, device="cuda")
u8 = torch.zeros(n * 132, dtype=torch.uint8, device="cuda")
ops = [
    ("slots >= 0", lambda: slots >= 0),
    ("(bool).sum()", lambda: (slots >= 0).sum()),
    ("slots.max()", lambda: slots.max()),
    ("torch.where", lambda: torch.where(slots >= 0, slots, n)),
    ("index_add_ int32", lambda: torch.zeros(n + 1, dtype=torch.int32, device="cuda").index_add_(0, slots, torch.ones_like(slots, dtype=torch.int32))),
    ("(a > 1).any()", lambda: (slots > 1).any()),
    ("torch.stack", lambda: torch.stack([slots[0], slots[1]])),
    (".tolist()", lambda: slots[:3].tolist()),
    ("torch.sort", lambda: torch.sort(slots)),
    ("uint8 clone", lambda: u8.clone()),
    ("uint8 !=", lambda: u8 != u8),
    ("torch.equal", lambda: torch.equal(u8, u8)),
    ("H2D copy 268 MB", lambda: torch.empty(n * 128, dtype=torch.bfloat16).to("cuda")),
    ("topk", lambda: slots.float().topk(8)),
    ("nonzero", lambda: (slots < 4).nonzero()),
    ("check_slots (count)", lambda: inputs.check_slots(spec, slots, "x")),
]
for name, fn in ops:
    times = []
    for _ in range(2):
        torch.cuda.synchronize(); start = time.perf_counter(); fn(); torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    print(f"{os.environ.get('CUDA_MODULE_LOADING', 'default'):>8} {name:<22} first {times[0]:7.1f} ms  again {times[1]:6.2f} ms", flush=True)
"""

for mode in ("LAZY", "EAGER"):
    env = dict(os.environ, CUDA_MODULE_LOADING=mode)
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=False)
