"""The interpreted grid's programs on every core: Triton's CPU interpreter, forked, bytes unchanged.

Triton's interpreter runs a grid one program after another, and each program costs ~2.5 ms of Python
(its semantic layer type-checks every `tl` operation: ~55 operations per program of a vLLM-style
writer, ~45 us each; measured with cProfile, docs/PERFORMANCE.md). A writer with one program per token
(vLLM's grid) therefore runs ~400 tokens/s on one core. This module splits axis 0 of a large grid into
contiguous shares, one per core, and runs each share in a forked process on a shared-memory copy of the
tensor arguments; the parent copies the results back. Program ids and grid sizes are those of the
whole grid, so every program computes what it computes sequentially.

Same bytes as the sequential run when programs write disjoint bytes, which is what GPUs assume too:
programs of a grid run in no defined order on a GPU, so a kernel whose bytes depend on the order
(two programs writing one byte: duplicate slots) is undefined there as well. Kernels that use atomics
or pre-run hooks, grids given as functions, tensors that are not on the CPU or nested in tuples, and
small grids run sequentially, as before. Installed by interpreter.install(); a Triton whose internals
moved is left alone (sequential).

Also: within a grid, triton.language is patched once per set of language modules instead of at every
device-function call (`_patch_language_once`): 341 -> 483 tokens/s on one core for the one-program-per-
token writer of tests/kernels (2026-11-30), bytes unchanged (tests/test_interpreter_speed.py).
"""

from __future__ import annotations

import functools
import inspect
import mmap
import os

import torch

MIN_PROGRAMS = 32  # below this the fork costs more than it saves (~10 ms per worker)
MAX_WORKERS: int | None = None  # None: every core this process may run on

_STATE: dict = {"installed": False, "offset": 0, "dims": None, "in_worker": False, "grid_langs": None}


def workers() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_WORKERS or cores))


def install() -> None:
    """Wrap GridExecutor.__call__ and the builder's program-id queries. Idempotent, never raises."""
    if _STATE["installed"] or not hasattr(os, "fork"):
        return
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    executor = getattr(interpreter, "GridExecutor", None)
    builder_cls = getattr(interpreter, "InterpreterBuilder", None)
    handle_cls = getattr(interpreter, "TensorHandle", None)
    needed = ("create_get_program_id", "create_get_num_programs", "set_grid_idx")
    if executor is None or handle_cls is None or not all(hasattr(builder_cls, n) for n in needed):
        return
    import numpy as np
    import triton.language as tl

    program_id, num_programs = builder_cls.create_get_program_id, builder_cls.create_get_num_programs

    @functools.wraps(program_id)
    def create_get_program_id(self, axis):
        if axis != 0 or not _STATE["offset"]:
            return program_id(self, axis)
        return handle_cls(np.array([self.grid_idx[0] + _STATE["offset"]], dtype=np.int32), tl.int32)

    @functools.wraps(num_programs)
    def create_get_num_programs(self, axis):
        if _STATE["dims"] is None:
            return num_programs(self, axis)
        return handle_cls(np.array([_STATE["dims"][axis]], dtype=np.int32), tl.int32)

    call = _patch_language_once(interpreter, tl, executor.__call__)

    @functools.wraps(call)
    def __call__(self, *args, **kwargs):
        dims = _parallel_grid(self, args, kwargs)
        if dims is None:
            return call(self, *args, **kwargs)
        return _run_forked(call, self, dims, args, kwargs, interpreter)

    builder_cls.create_get_program_id = create_get_program_id
    builder_cls.create_get_num_programs = create_get_num_programs
    executor.__call__ = __call__
    _STATE["installed"] = True


class _AlreadyPatched:
    def restore(self) -> None:
        pass


def _patch_language_once(interpreter, tl, call):
    """Within one grid, patch triton.language once, not at every device-function call.

    Triton's interpreter patches triton.language (inspect.getmembers over tl, tl.tensor, tl.math, ...) for
    the grid, and again at every call of a device function (tl.max, tl.sum, a kernel's own @jit helpers:
    one or more per program of a vLLM-style writer), ~0.4 ms each, while the grid's patch is in force. The
    repeated patch sets the same attributes to equivalent wrappers, so it is skipped when the language
    modules the function sees were patched in this grid already. Returns `call` (GridExecutor.__call__)
    wrapped to mark where a grid starts and ends; a Triton without `_patch_lang` is left alone."""
    original = getattr(interpreter, "_patch_lang", None)
    if original is None:
        return call

    def patch_lang(fn):
        langs = frozenset(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)
        patched = _STATE["grid_langs"]
        if patched is not None and langs and langs <= patched:
            return _AlreadyPatched()
        scope = patch_lang.triton_original(fn)
        if patched is not None:
            _STATE["grid_langs"] = patched | langs
        return scope

    @functools.wraps(call)
    def grid_call(self, *args, **kwargs):
        previous, _STATE["grid_langs"] = _STATE["grid_langs"], frozenset()  # the grid's own patch comes first
        try:
            return call(self, *args, **kwargs)
        finally:
            _STATE["grid_langs"] = previous

    patch_lang.triton_original = original
    interpreter._patch_lang = patch_lang
    return grid_call


def _parallel_grid(executor, args, kwargs) -> tuple[int, int, int] | None:
    """The whole grid (3 dims) when it may run forked, else None."""
    grid = executor.grid
    if _STATE["in_worker"] or callable(grid) or workers() < 2 or executor.pre_run_hooks:
        return None
    dims = tuple(grid) + (1,) * (3 - len(grid))
    if dims[0] < MIN_PROGRAMS:
        return None
    values = (*args, *kwargs.values())
    if any(isinstance(v, torch.Tensor) and v.device.type != "cpu" for v in values):
        return None
    if any(isinstance(v, (tuple, list)) and any(isinstance(x, torch.Tensor) for x in v) for v in values):
        return None
    return None if _uses_atomics(executor.fn) else dims


def _uses_atomics(fn) -> bool:
    """Whether the kernel (or a @jit function it names) mentions tl.atomic_*: those need program order."""
    seen = set()

    def names(code) -> set[str]:
        found = set(code.co_names)
        for const in code.co_consts:
            if inspect.iscode(const):
                found |= names(const)
        return found

    todo = [fn]
    while todo:
        current = todo.pop()
        code = getattr(current, "__code__", None)
        if code is None or code in seen:
            continue
        seen.add(code)
        used = names(code)
        if any(name.startswith("atomic_") for name in used):
            return True
        scope = getattr(current, "__globals__", {})
        todo.extend(getattr(scope.get(name), "fn", None) for name in used if hasattr(scope.get(name), "fn"))
    return False


def _shared_copies(values) -> dict[int, tuple[torch.Tensor, torch.Tensor, mmap.mmap]]:
    """Per storage of the tensor arguments: (its bytes, a copy in anonymous shared memory, the mapping)."""
    copies = {}
    for value in values:
        if not isinstance(value, torch.Tensor):
            continue
        storage = value.untyped_storage()
        if storage.data_ptr() in copies:
            continue
        original = torch.empty(0, dtype=torch.uint8).set_(storage)
        mapping = mmap.mmap(-1, max(1, storage.nbytes()))  # MAP_SHARED | MAP_ANONYMOUS: children write here
        shared = torch.frombuffer(mapping, dtype=torch.uint8, count=storage.nbytes()) if storage.nbytes() else original
        shared.copy_(original)
        copies[storage.data_ptr()] = (original, shared, mapping)
    return copies


def _on_shared(value, copies):
    if not isinstance(value, torch.Tensor):
        return value
    shared = copies[value.untyped_storage().data_ptr()][1]
    return torch.empty(0, dtype=value.dtype).set_(shared.untyped_storage(), value.storage_offset(), value.size(),
                                                  value.stride())


def _run_share(call, executor, dims, lo, hi, args, kwargs) -> None:
    """Programs lo..hi-1 of axis 0, seeing the whole grid's ids and sizes."""
    grid = executor.grid
    _STATE.update(offset=lo, dims=dims)
    executor.grid = (hi - lo, *dims[1:])
    try:
        call(executor, *args, **kwargs)
    finally:
        executor.grid = grid
        _STATE.update(offset=0, dims=None)


def _run_forked(call, executor, dims, args, kwargs, interpreter) -> None:
    copies = _shared_copies((*args, *kwargs.values()))
    shared_args = tuple(_on_shared(a, copies) for a in args)
    shared_kwargs = {k: _on_shared(v, copies) for k, v in kwargs.items()}
    n = min(workers(), dims[0])
    bounds = [dims[0] * i // n for i in range(n + 1)]
    children = []
    for i in range(1, n):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # worker: its share, then exit without running the parent's cleanup
            os.close(read)
            status = 0
            try:
                torch.set_num_threads(1)  # the parent's OpenMP pool does not survive a fork
                _STATE["in_worker"] = True
                _run_share(call, executor, dims, bounds[i], bounds[i + 1], shared_args, shared_kwargs)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
                os.write(write, f"{type(exc).__name__}: {exc}".encode()[:8000])
                status = 1
            os._exit(status)
        os.close(write)
        children.append((pid, read))
    error = None
    try:
        _run_share(call, executor, dims, bounds[0], bounds[1], shared_args, shared_kwargs)
    except BaseException as exc:  # noqa: BLE001 - raised after the workers are collected
        error = exc
    failures = []
    for pid, read in children:
        with os.fdopen(read, "rb") as pipe:
            message = pipe.read().decode(errors="replace")
        _, status = os.waitpid(pid, 0)
        if status:
            failures.append(message or f"worker process exited with status {status}")
    if error is not None:
        raise error
    if failures:
        raise interpreter.InterpreterError(failures[0])
    for original, shared, _ in copies.values():
        original.copy_(shared)
