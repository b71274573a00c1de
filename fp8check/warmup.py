"""A GPU loads each op's kernels at the op's first use in a process: 5-50 ms apiece on the H200
(bench/gpu_first_use.py), ~0.3 s in all for the ops one `compare` runs, on top of compiled Triton's own
start (~0.15 s at its first launch). `start(device)` runs those first uses on tiny private tensors in a
background thread, as soon as a command knows it runs on a GPU, while the main thread is busy with
Python (imports, generating or reading inputs, Triton's launcher): torch releases the GIL inside its
ops, so the loading overlaps. Nothing here touches a run's tensors or any generator, and whatever goes
wrong here is ignored: the main thread meets the same op itself and reports it. The thread is not a
daemon, so the interpreter waits for it (a fraction of a second at most) before it shuts CUDA down.
"""

from __future__ import annotations

import threading

_started: threading.Thread | None = None


def exercise(device) -> None:
    """The torch ops of a compare (poisoned buffers, clones, byte comparisons, the diagnosis' counts and
    index work), once each on a few elements of `device`."""
    import torch

    from .cache import CacheBuffer
    from .spec import CacheSpec

    # no Triton kernel here: Triton's launch path is not made for two threads at once
    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=32, quant_block_size=32)
    a, b = CacheBuffer.allocate(spec, device), CacheBuffer.allocate(spec, device)
    a.cache_untouched()
    a.guard_writes()
    k = torch.zeros(spec.num_slots, spec.head_dim, dtype=torch.bfloat16, device=device)
    torch.equal(k.clone().view(torch.uint8), k.view(torch.uint8))
    differ = a.flat != b.flat
    torch.count_nonzero(differ)
    per_block = differ.sum(dim=1).to(torch.int64)
    torch.cat([per_block.nonzero().view(-1), torch.topk(per_block, 1).indices]).tolist()
    torch.cumsum(per_block, 0)
    torch.sort(per_block)
    k.float().abs().amax(dim=1)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _run(device) -> None:
    try:
        exercise(device)
    except Exception:  # noqa: BLE001 - the main thread meets the same op and reports it
        pass


def start(device) -> None:
    """Start the warm-up once per process, on a GPU only (a CPU op costs nothing to load)."""
    global _started
    if _started is not None or getattr(device, "type", str(device)) != "cuda":
        return
    _started = threading.Thread(target=_run, args=(device,), name="fp8check-warmup")
    _started.start()
