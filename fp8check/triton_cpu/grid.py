"""Triton's CPU interpreter, a whole grid at a time: the same bytes as program after program, faster.

Triton's interpreter pays ~2.5 ms of Python per program (docs/PERFORMANCE.md). Here the programs of a grid run
in lockstep as one batch: `tl.program_id` is a vector, every value's numpy data has a leading program axis (an
axis of 1 for a value all programs share), and loads and stores gather and scatter through the real memory with
their masks. Where Python needs a concrete value the programs disagree on (`if`, `int()`, a loop bound), the
batch is split by it and each part runs again from the start; a `tl.range` whose bounds differ between programs
but whose trip count does not runs once, its variable a `ProgramInts`.

Why the bytes are the sequential interpreter's: every program executes exactly the operations of its own path,
in its order, with the interpreter's own numpy functions (reductions as numpy reduces one block; the
differential tests hold it to that). Only the order between programs changes, so after the grid no byte any
program stored may have been loaded by any program, and no byte stored by two. When either fails, an operation
is not implemented here (atomics, custom scans, prints, block pointers, descriptors, an unknown builder method),
a private Triton name moved, or the kernel raises, the stores are undone and the grid runs in Triton's
sequential interpreter; its `GridRun` says why. Active only inside `grid_at_once()`."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging

import numpy as np

from ..core.errors import plural
from .grid_builder import _Batch, _Stored, _cache_arguments, _make_builder_class
from .grid_language import Unsupported, _Diverge, _batched_language


# Private names of triton.runtime.interpreter this module builds on (checked by `available()`).
REQUIRED_NAMES = ("InterpreterBuilder", "TensorHandle", "GridExecutor", "InterpretedFunction",
                  "interpreter_semantic", "interpreter_builder", "_patch_attr", "_patch_lang_tensor",
                  "_patch_lang_core", "_implicit_cvt", "_get_np_dtype", "_convert_float", "_LangPatchScope",
                  "InterpreterError")
_LOG = logging.getLogger(__name__)  # one line per grid handed to the sequential interpreter, with the reason
BATCH_PROGRAMS = 4096  # programs per batch: bounds memory ([P, block] arrays), large enough to amortise

@dataclasses.dataclass(frozen=True)
class GridRun:
    """How one interpreted grid ran: at once (`sequential_reason` None) or program by program."""

    kernel: str
    programs: int
    batches: int
    sequential_reason: str | None

    def note(self) -> str:
        many = f"{plural(self.programs, 'program')} {'runs' if self.programs == 1 else 'run'}"
        if self.sequential_reason is None:
            return f"{self.kernel}: {many} grid-at-once in {plural(self.batches, 'batch', 'batches')}"
        return f"{self.kernel}: {many} sequentially: {self.sequential_reason}"


def available() -> tuple[bool, str]:
    """(ok, reason): whether this Triton has the interpreter internals the grid-at-once run needs."""
    try:
        from triton.runtime import interpreter
    except ImportError as exc:
        return False, f"triton.runtime.interpreter not importable ({exc})"
    missing = [name for name in REQUIRED_NAMES if not hasattr(interpreter, name)]
    if missing:
        import triton

        return False, f"Triton {triton.__version__}'s interpreter lacks {', '.join(missing)}"
    return True, "grid-at-once interpreter available"


def _groups(values: np.ndarray) -> list[np.ndarray]:
    """Indices of the batch split by a value, each part in program order, parts ordered by first program."""
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    return [np.flatnonzero(inverse == label) for label in np.argsort(first)]


def _run_batches(fn, args: dict, grid: tuple[int, int, int], builder, on_program) -> int:
    """Every program of the grid, in batches; returns how many batches completed."""
    batch, total = builder.batch, grid[0] * grid[1] * grid[2]
    queue = [np.arange(start, min(start + BATCH_PROGRAMS, total), dtype=np.int64)
             for start in range(0, total, BATCH_PROGRAMS)]
    attempts = completed = 0
    while queue:
        programs = queue.pop(0)
        attempts += 1
        if attempts > 2 * total + 8:  # each split makes >= 2 parts of >= 1 program: never reached
            raise Unsupported("control flow splits the grid into too many paths")
        batch.attempt_loads, batch.attempt_stores = [], []
        batch.batch_number = attempts
        builder.begin(programs, grid)
        try:
            fn(**args)
        except _Diverge as split:
            if split.values.shape[0] != programs.shape[0]:
                raise Unsupported("a value Python needs differs in a way the batch cannot split") from None
            queue[0:0] = [programs[group] for group in _groups(split.values)]
            continue
        batch.load_ranges += batch.attempt_loads
        batch.stores += batch.attempt_stores
        completed += 1
        on_program(len(programs))
    return completed


def _check_independent(batch: _Batch) -> None:
    """Raise Unsupported unless the programs were independent: no stored byte loaded, none stored twice."""
    if not batch.stores:
        return
    starts, ends = np.array([(st.low, st.high) for st in batch.stores], dtype=np.int64).T
    if batch.load_ranges:
        order = np.argsort(starts)
        starts_sorted, ends_running = starts[order], np.maximum.accumulate(ends[order])
        loads = np.array(batch.load_ranges, dtype=np.int64)
        index = np.searchsorted(starts_sorted, loads[:, 1], side="left") - 1
        if ((index >= 0) & (ends_running[np.maximum(index, 0)] > loads[:, 0])).any():
            raise Unsupported("a program loads bytes that the grid stores (programs not independent)")
    by_storage: dict[int | None, list[_Stored]] = {}
    for stored in batch.stores:  # distinct storages share no byte: each is checked on its own
        by_storage.setdefault(stored.storage, []).append(stored)
    for stores in by_storage.values():  # no byte stored by two programs
        low, high = min(st.low for st in stores), max(st.high for st in stores)
        flat = np.concatenate([(st.addresses().astype(np.uint64).reshape(-1, 1)
                                + np.arange(st.width, dtype=np.uint64)).reshape(-1) for st in stores])
        if high - low <= 4 * flat.size + (1 << 20) and \
                int(np.bincount((flat - np.uint64(low)).astype(np.int64), minlength=high - low).max()) <= 1:
            continue  # no byte stored twice at all
        owner = np.concatenate([np.repeat(st.owner_of_each(), st.width) for st in stores])
        order = np.lexsort((owner, flat))
        flat, owner = flat[order], owner[order]
        if bool(((flat[1:] == flat[:-1]) & (owner[1:] != owner[:-1])).any()):
            raise Unsupported("two programs store to the same byte (their order decides it)")


def _undo(interpreter, batch: _Batch) -> None:
    import triton.language as tl

    handle = interpreter.TensorHandle
    store = interpreter.InterpreterBuilder.create_masked_store
    cache = (None,) * _cache_arguments(store, 4)
    for pointers, old, flags, ptr_dtype in reversed(batch.gathered):
        store(interpreter.interpreter_builder, handle(pointers, ptr_dtype), handle(old, ptr_dtype.element_ty),
              handle(flags, tl.int1 if flags.dtype == np.bool_ else tl.int32), *cache)
    for tensor, copy in batch.snapshots.values():
        tensor.copy_(copy)
    batch.gathered.clear()
    batch.snapshots.clear()


def _storages(args) -> list[tuple[int, int, object]]:
    """(first byte, end, uint8 tensor over all of it) of each distinct storage among tensor arguments."""
    import torch

    found = {}
    for arg in args:
        tensor = getattr(arg, "base", arg) if not isinstance(arg, torch.Tensor) else arg
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
            storage = tensor.untyped_storage()
            start = storage.data_ptr()
            if start not in found and storage.nbytes():
                whole = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))
                found[start] = (start, start + storage.nbytes(), whole)
    return list(found.values())


def _grid_call(interpreter, original, runs: list[GridRun]):
    """GridExecutor.__call__ running the grid at once, sequentially where it cannot."""

    def __call__(self, *args_dev, **kwargs):
        name = getattr(self.fn, "__name__", "kernel")
        argspec = inspect.getfullargspec(self.fn)
        kwargs = {k: v for k, v in kwargs.items() if k in argspec.args or k in argspec.kwonlyargs}
        if not callable(self.grid) and all(int(g) == 1 for g in self.grid):
            runs.append(GridRun(name, 1, 0, "a grid of one program runs as it is"))
            return original(self, *args_dev, **kwargs)
        if self.pre_run_hooks or any(getattr(a, "device", None) is not None and a.device.type != "cpu"
                                     for a in (*args_dev, *kwargs.values())):
            _fall_back(runs, GridRun(name, 0, 0, "the kernel has pre-run hooks" if self.pre_run_hooks
                                     else "a tensor argument is not on the CPU"))
            return original(self, *args_dev, **kwargs)
        args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
        batch = _Batch(_storages(list(args_hst) + list(kwargs_hst.values())))
        builder = _make_builder_class(interpreter)(batch)
        programs = 0
        try:
            args = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
            args = {n: a if n in self.constexprs else interpreter._implicit_cvt(a) for n, a in args.items()}
            grid = self.grid(args) if callable(self.grid) else self.grid
            grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
            programs = grid[0] * grid[1] * grid[2]
            shared = interpreter.interpreter_builder
            shared.set_grid_dim(*grid)
            builder.set_grid_dim(*grid)

            def on_program(count):  # progress listeners hear every program, as in a sequential run
                for _ in range(count):
                    shared.set_grid_idx(0, 0, 0)

            with _batched_language(interpreter, builder):
                batches = _run_batches(self.fn, args, grid, builder, on_program)
            _check_independent(batch)
        except Exception as exc:  # noqa: BLE001 - anything unusual: undo, and the sequential interpreter decides
            _undo(interpreter, batch)
            _LOG.debug("grid-at-once run of %s stopped", name, exc_info=True)
            why = str(exc) if isinstance(exc, Unsupported) else \
                f"{type(exc).__name__} in the batched run: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            _fall_back(runs, GridRun(name, programs, 0, why))
            return original(self, *args_dev, **kwargs)
        self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)
        runs.append(GridRun(name, programs, batches, None))
        return None

    return __call__


def _fall_back(runs: list[GridRun], run: GridRun) -> None:
    runs.append(run)
    _LOG.warning("%s", run.note())


_ACTIVE: list[list[GridRun]] = []


@contextlib.contextmanager
def grid_at_once():
    """Within the block, interpreted Triton grids run at once where they can (see the module docstring).
    Yields the list of GridRun records of the grids run inside. Nested uses share the outer one."""
    if _ACTIVE:
        yield _ACTIVE[-1]
        return
    runs: list[GridRun] = []
    ok, reason = available()
    if not ok:
        runs.append(GridRun("(all kernels)", 0, 0, reason))
        yield runs
        return
    from triton.runtime import interpreter

    executor = interpreter.GridExecutor
    original = executor.__call__
    executor.__call__ = _grid_call(interpreter, original, runs)
    _ACTIVE.append(runs)
    try:
        yield runs
    finally:
        _ACTIVE.pop()
        executor.__call__ = original
