"""A GPU loads each op's kernels at the op's first use in a process: 5-50 ms apiece on the H200
(bench/gpu_first_use.py), ~0.3 s in all for the ops one `compare` runs, on top of compiled Triton's own
start (~0.15 s at its first launch). `start(device)` runs those first uses on tiny private tensors in a
background thread, as soon as a command knows it runs on a GPU, while the main thread is busy with
Python (imports, generating or reading inputs, Triton's launcher): torch releases the GIL inside its
ops, so the loading overlaps. Nothing here touches a run's tensors or any generator, and whatever goes
wrong here is ignored: the main thread meets the same op itself and reports it. The thread is not a
daemon, so the interpreter waits for it (a fraction of a second at most) before it shuts CUDA down.

Most of compiled Triton's start is imports (TRITON_LAUNCH_MODULES): `import_launch_modules_in_background`
runs them in a thread of their own while the main thread reads a large K (input_cache.py).
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


# Modules compiled Triton imports at the first launch of any kernel in a process: its argument
# specializer (C++) looks up the tensor-descriptor classes of these modules, ~0.11 s of imports on the
# H200 machine (bench/gpu_profile.sh, Triton 3.6), most of it the gluon package. Importing is
# thread-safe (Python's per-module import locks): a launch that comes first waits for the module, and
# an import that fails here is met again, and reported, by the launch itself.
TRITON_LAUNCH_MODULES = (
    "triton._utils", "triton.tools.tensor_descriptor", "triton.experimental.gluon.nvidia.hopper",
    "triton.experimental.gluon.amd.gfx1250",
)


def import_launch_modules() -> None:
    """Import TRITON_LAUNCH_MODULES that this Triton has (a missing one is skipped), and ask Triton's
    platform key, which its first launch needs."""
    import importlib

    for name in TRITON_LAUNCH_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - another Triton version: the launch imports what it needs
            pass
    try:  # the first launch's key of the launcher's cached binary: platform.architecture() runs `file` on
        # the interpreter (a subprocess, ~18 ms on the H200 machine); Triton keeps the answer (lru_cache)
        from triton.runtime.build import platform_key

        platform_key()
    except Exception:  # noqa: BLE001 - another Triton version: its launch does what it needs
        pass


_importing: threading.Thread | None = None


def import_launch_modules_in_background() -> None:
    """import_launch_modules in a thread of its own, once per process: for a caller about to wait with
    the GIL released (input_cache's read of a large K from disk to a GPU). Imports need the GIL, so the
    thread only helps while the main thread waits: the warm-up thread of `start` does not import them,
    as it would slow a main thread that is busy with Python itself (measured on the H200 with `--inputs
    hashed`: the launch imports moved out of the first launch and into every stage after it)."""
    global _importing
    if _importing is not None:
        return
    _importing = threading.Thread(target=import_launch_modules, name="fp8check-triton-imports")
    _importing.start()


def _run(device) -> None:
    try:
        exercise(device)
    except Exception:  # noqa: BLE001 - the main thread meets the same op and reports it
        pass


def driver_start(ordinal: int = 0) -> bool:
    """Start CUDA's driver and retain device `ordinal`'s primary context (the one torch's runtime then
    uses) through the driver's C API, loaded with ctypes, which releases the GIL around each call.

    torch starts the driver (cuInit, ~0.19 s on the H200) inside torch.cuda.init(), or in whichever op
    comes first, holding the GIL: a main thread busy with imports stood still for all of it
    (bench/timeline.py), and it ran at about half speed while the first allocation created the context
    (~0.25 s). Done here first, both are GIL-free waits, and torch's own start finds them done. The
    retained context is released with the process. False (and nothing done) where there is no NVIDIA
    driver to load, or a call fails: torch then does it all as usual, and reports what fails."""
    import ctypes

    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    device, context = ctypes.c_int(), ctypes.c_void_p()
    return (driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(device), ordinal) == 0
            and driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0)


def start_early(name: str) -> None:
    """`start` for `--device NAME` before anything else of the command is done: with `cuda` (or `auto`
    where torch sees a GPU, asked in the thread) the warm-up thread starts now, and its first steps create
    the CUDA context: 0.35-0.45 s on the H200, the GIL released throughout (driver_start), so that
    `fp8check compare` imports its modules and Triton's launch modules meanwhile, instead of before it
    (bench/timeline.py shows both threads). Whatever goes wrong is left to the main thread
    (resolve_device reports it)."""
    global _started
    if _started is not None or name not in ("cuda", "auto"):
        return
    import torch

    def run() -> None:
        # the driver's start first, through ctypes (driver_start): torch runs it holding the GIL. Where
        # there is no GPU, init() raises: nothing to warm up (`auto`), or resolve_device's one line (`cuda`).
        try:
            if torch.version.cuda is not None:  # a CPU or ROCm build of torch would not use the context
                driver_start()
            torch.cuda.init()
        except Exception:  # noqa: BLE001 - resolve_device asks again and reports
            return
        _run(torch.device("cuda"))

    _started = threading.Thread(target=run, name="fp8check-warmup")
    _started.start()


def start(device) -> None:
    """Start the warm-up once per process, on a GPU only (a CPU op costs nothing to load)."""
    global _started
    if _started is not None or getattr(device, "type", str(device)) != "cuda":
        return
    _started = threading.Thread(target=_run, args=(device,), name="fp8check-warmup")
    _started.start()
