"""Generated K kept on disk: torch's CPU generator draws 1M tokens of `normal` K in ~1 s, a re-read takes
~0.1 s (on a GPU, the checksum over the mapped file and one copy to the device).

Only K from torch's CPU generator is kept (every distribution but `hashed`, which a GPU computes in a
millisecond), and only from MIN_ELEMENTS up (smaller K is cheaper to draw than to read). An entry is
found by the sha256 of everything its bytes depend on: the distribution, seed, slot pattern, the spec
fields the generator reads, torch's version (its generator's stream) and the source of the modules that
draw (inputs.py, fp8.py, spec.py), so an edit to the generator can never replay old bytes. A read entry
must have the exact size and the checksum written with it (a 64-bit wrapping sum of its 8-byte words and
a sum of the rest), else it is drawn again and rewritten. Entries live in disk_cache's folder under
`inputs/`, at most MAX_BYTES in all (least recently used first out); `FP8CHECK_CACHE_DIR=` turns it off.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import torch

from . import disk_cache
from .spec import CacheSpec

KIND = "inputs"
MIN_ELEMENTS = 1 << 22  # 32,768 tokens of head_dim 128: ~40 ms to draw on a fast CPU
MAX_BYTES = 1 << 30
FORMAT = 1


@functools.lru_cache(maxsize=1)
def generator_sources() -> str | None:
    """sha256 of the code that draws K: a changed generator is a different key (None: unreadable, no cache)."""
    return disk_cache.files_digest(Path(__file__).parent / name for name in ("inputs.py", "fp8.py", "spec.py"))


def key(spec: CacheSpec, fields: dict) -> str:
    return disk_cache.key_of({
        "format": FORMAT, "torch": torch.__version__, "sources": generator_sources(),
        "num_slots": spec.num_slots, "block_size": spec.block_size, "head_dim": spec.head_dim,
        "quant_block_size": spec.quant_block_size, "fp8": spec.fp8.value, **fields,
    })


def checksum(k: torch.Tensor) -> list[int]:
    """[the sum of k's 8-byte words (torch's int64 sum, wrapping); the sum of its remaining bytes]."""
    raw = k.reshape(-1).view(torch.uint8)
    whole = raw.numel() // 8 * 8
    return [int(raw[:whole].view(torch.int64).sum()), int(raw[whole:].to(torch.int64).sum())]


def cached_k(spec: CacheSpec, fields: dict, num_tokens: int, make, device=None) -> torch.Tensor:
    """`make()` (a bf16 [num_tokens, head_dim] CPU tensor), or the same bytes read back from the cache:
    on `device` when one is given (a GPU's copy is made straight from the mapped file), else on the CPU."""
    if num_tokens * spec.head_dim < MIN_ELEMENTS:
        return make()
    path = disk_cache.entry(KIND, key(spec, fields), ".safetensors") if generator_sources() else None
    if path is None:
        return make()
    k = _read(path, (num_tokens, spec.head_dim), device)
    if k is not None:
        disk_cache.touch(path)
        return k
    k = make()
    if _write(path, k):
        disk_cache.evict(path.parent, MAX_BYTES, keep=path)
    return k


class Background:
    """K made in a thread of its own; `result()` waits for it and raises what the thread raised."""

    def __init__(self, work) -> None:
        self._k = self._error = None
        self._thread = threading.Thread(target=self._run, args=(work,), name="fp8check-read-k")
        self._thread.start()

    def _run(self, work) -> None:
        try:
            self._k = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._error = exc

    def result(self) -> torch.Tensor:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._k


def cached_k_in_background(spec: CacheSpec, fields: dict, num_tokens: int, make, device=None):
    """cached_k(...) on `device`, for a large K (one cached_k would keep) in a thread of its own (a
    Background): its read waits on the disk and on memory, and its draw runs in torch's ops, with the GIL
    released, so the caller's Python (resolving the writers, the slot check) runs meanwhile. The thread
    is not a daemon: a run that fails meanwhile still waits for it before CUDA shuts down. A small K is
    made here, on the CPU (the caller copies it to the device when it needs it)."""
    if num_tokens * spec.head_dim < MIN_ELEMENTS:
        return cached_k(spec, fields, num_tokens, make)

    def work() -> torch.Tensor:
        # on a GPU, K's copy (0.26 GB from pageable memory, ~45 ms on the H200) runs on a stream of its own,
        # waited for here: on the shared stream the main thread's small copies (the slot mapping) queued
        # behind it (bench/timeline.py)
        side = torch.cuda.Stream(device) if device is not None and torch.device(device).type == "cuda" else None
        with torch.cuda.stream(side):
            k = cached_k(spec, fields, num_tokens, make, device)
            k = k.to(device) if device is not None else k
        if side is not None:
            side.synchronize()
        return k

    return Background(work)


def _read(path: Path, shape: tuple[int, int], device=None) -> torch.Tensor | None:
    """The entry's K (on `device`, else the CPU), or None unless it has this shape and the checksum
    written with it. safetensors maps the file privately (copy on write: a run that writes into K never
    writes into the cache folder, tests/test_disk_caches.py), the checksum reads the mapped pages, and a
    GPU's copy is made straight from them. (Measured on the H200: staging the copy to the GPU through
    pinned buffers cost more in a fresh process, whose first pinned allocation is slow, than a pageable
    copy.)"""
    from safetensors import SafetensorError, safe_open

    on_gpu = device is not None and torch.device(device).type != "cpu"
    if on_gpu:
        # the read below waits on the disk and on memory with the GIL released: Triton's launch imports
        # run meanwhile (warmup.py)
        from .warmup import import_launch_modules_in_background

        import_launch_modules_in_background()
    try:
        with safe_open(str(path), framework="pt") as f:
            expected = f.metadata().get("checksum")
            mapped = f.get_tensor("k")
            if mapped.dtype != torch.bfloat16 or tuple(mapped.shape) != shape or expected != str(checksum(mapped)):
                return None
            return mapped.to(device) if on_gpu else mapped
    except (OSError, SafetensorError, ValueError, RuntimeError, KeyError, AttributeError):
        return None


def _write(path: Path, k: torch.Tensor) -> bool:
    from safetensors.torch import save

    data = save({"k": k}, metadata={"checksum": str(checksum(k))})
    return disk_cache.write(path, lambda out: out.write(data))
