"""Where one fresh `fp8check compare` process spends its wall time, stage by stage, without a profiler.

    PYTHONPATH=. python3 bench/startup.py [compare options...]     (default: --device cuda --num-blocks 16384)

The stages are timed by wrapping fp8check's own functions and Triton's first launch of each kernel (the
load of a cached binary, or a compile) in this process; the table lists each stage's wall time in order,
nested stages indented, and the total against the import (+ CUDA context) floor measured first.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()
import sys  # noqa: E402
import threading  # noqa: E402

import torch  # noqa: E402,F401
import triton  # noqa: E402,F401
import click  # noqa: E402,F401
import rich.console  # noqa: E402,F401

import fp8check.cli  # noqa: E402

events: list[tuple[int, str, float]] = []
depth = 0
events.append((0, "imports (the floor's: torch, triton, click, rich, fp8check.cli)", time.perf_counter() - T0))
argv = sys.argv[1:] or ["--device", "cuda", "--num-blocks", "16384"]
if "cuda" in argv:
    start = time.perf_counter()
    torch.zeros(1, device="cuda")
    events.append((0, "CUDA context (the floor's torch.zeros(1, device='cuda'))", time.perf_counter() - start))
FLOOR = time.perf_counter() - T0

import gc  # noqa: E402

collections: list[tuple[int, float]] = []  # (generation, seconds) of each collection after the floor
_gc_start = [0.0]


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _gc_start[0] = time.perf_counter()
    else:
        collections.append((info["generation"], time.perf_counter() - _gc_start[0]))


gc.callbacks.append(_on_gc)


def timed(label, fn):
    def wrapper(*args, **kwargs):
        global depth
        if threading.current_thread() is not threading.main_thread():  # fp8check's GPU warm-up thread
            return fn(*args, **kwargs)
        start = time.perf_counter()
        slot = len(events)
        events.append((depth, label, 0.0))
        depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            depth -= 1
            if "cuda" in argv:
                torch.cuda.synchronize()
            events[slot] = (events[slot][0], label, time.perf_counter() - start)
    wrapper.__wrapped_fn__ = fn
    return wrapper


def patch(module_name: str, attr: str, label: str | None = None) -> None:
    """Wrap module.attr, and every fp8check module's name bound to the same function."""
    import importlib

    module = importlib.import_module(module_name)
    original = getattr(module, attr)
    wrapper = timed(label or f"{module_name.removeprefix('fp8check.')}.{attr}", original)
    for name, mod in list(sys.modules.items()):
        if name.startswith("fp8check") and getattr(mod, attr, None) is original:
            setattr(mod, attr, wrapper)


for target in [
    ("fp8check.prepare", "build"), ("fp8check.prepare", "start"), ("fp8check.inputs", "generate"),
    ("fp8check.inputs", "start_generate"), ("fp8check.inputs", "check_slots"),
    ("fp8check.prepare", "resolve_producers"), ("fp8check.gate", "check_compare"),
    ("fp8check.compare", "compare"), ("fp8check.compare", "run_side"), ("fp8check.diff", "diff_caches"),
    ("fp8check.gate", "diagnose"), ("fp8check.gate", "check_budget"),
    ("fp8check.writers.reference_device", "known_answer"), ("fp8check.triton_memo", "install"), ("fp8check.warmup", "start"), ("fp8check.writers.registry", "run_producer"),
    ("fp8check.report.terminal", "render_compare"), ("fp8check.report.json", "compare_json"),
    ("fp8check.cli.compare", "emit"),
]:
    try:
        patch(*target)
    except (ImportError, AttributeError) as exc:
        print(f"(not timed: {target}: {exc})", file=sys.stderr)

try:  # the main thread's wait for K read in a thread (prepare.start)
    from fp8check import prepare as _prepare

    _prepare.Started.result = timed("prepare.Started.result (waits for K)", _prepare.Started.result)
except (ImportError, AttributeError) as exc:
    print(f"(not timed: Started.result: {exc})", file=sys.stderr)

if "cuda" in argv:
    import triton.runtime.cache as triton_cache
    import triton.runtime.jit as jit

    # triton_key itself is not wrapped: fp8check replaces it from its cache folder (triton_memo.py) only
    # while it is Triton's own lru_cache'd function
    seen: set = set()
    run = jit.JITFunction.run

    def first_run(self, *args, **kwargs):
        if self.fn.__qualname__ in seen:
            return run(self, *args, **kwargs)
        seen.add(self.fn.__qualname__)
        return timed(f"triton: first launch of {self.fn.__module__}.{self.fn.__qualname__}", run)(self, *args, **kwargs)

    jit.JITFunction.run = first_run

start = time.perf_counter()
code = fp8check.cli.main(["compare", *argv])
events.append((0, f"fp8check.cli.main (exit {code})", time.perf_counter() - start))
total = time.perf_counter() - T0
print(f"\n{'stage':<78} {'ms':>9}", file=sys.stderr)
for level, label, seconds in events:
    print(f"{'  ' * level + label:<78} {seconds * 1e3:9.1f}", file=sys.stderr)
print(f"{'total':<78} {total * 1e3:9.1f}\n{'floor (imports + context, this process)':<78} {FLOOR * 1e3:9.1f}"
      f"\n{'over the floor':<78} {(total - FLOOR) * 1e3:9.1f}", file=sys.stderr)
full = [seconds for generation, seconds in collections if generation == 2]
print(f"{'  of it, CPython collector (%d collections, %d full)' % (len(collections), len(full)):<78} "
      f"{sum(seconds for _, seconds in collections) * 1e3:9.1f}", file=sys.stderr)
