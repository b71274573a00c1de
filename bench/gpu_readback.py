"""Read-back K on a GPU (input_cache: the mapped entry's checksum, then one copy to the device) equals the
drawn K, byte for byte, and what the read costs in a warm process against a pageable copy of the drawn K
alone. Its first H200 run (2026-11-30) measured a since-dropped variant that staged the copy through
pinned buffers (docs/PERFORMANCE.md). Run on a GPU:

    FP8CHECK_CACHE_DIR=/tmp/fp8check-cache PYTHONPATH=. python3 bench/gpu_readback.py
"""

from __future__ import annotations

import time

import torch

from fp8check import inputs
from fp8check.spec import CacheSpec

spec = CacheSpec(num_blocks=16384, block_size=64, head_dim=128)
drawn = inputs.generate(spec, seed=0)  # on the CPU; kept in the cache folder
for _ in range(2):
    start = time.perf_counter()
    back = inputs.generate(spec, seed=0, device="cuda")
    torch.cuda.synchronize()
    read_back = time.perf_counter() - start
start = time.perf_counter()
plain = drawn.k.to("cuda")
torch.cuda.synchronize()
pageable = time.perf_counter() - start
same = torch.equal(back.k.view(torch.int16).cpu(), drawn.k.view(torch.int16)) and back.k.is_cuda
print(f"read-back K on the GPU equals the drawn K: {same}; generate(read back) {read_back * 1e3:.1f} ms,"
      f" pageable .to(cuda) of the drawn K alone {pageable * 1e3:.1f} ms")
