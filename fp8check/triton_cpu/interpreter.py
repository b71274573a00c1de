"""Triton kernels on CPU tensors: Triton's interpreter, with an exact float -> FP8 conversion, per kernel.

The interpreter's own FP8 conversion is not exact (docs/NUMERICS.md: ties away from zero, lost carries, no
saturation, NaN mishandled). Inside `cpu_kernels()`, and only there, a kernel launched with CPU tensors runs in
the interpreter with fp8check's exact encoder (fp8.py) and compiled Triton's NaN/inf numerics
(compiled_numerics.py); one launched with GPU tensors compiles as usual, whatever environment variable Triton
read at import. On exit everything is as it was, including the `triton.language` attributes the interpreter
patches and never restores (Triton 3.9: 64 of `triton.language.core`, which would break a later compiled
kernel). e4m3fnuz tensors reach the interpreter typed as e4m3fn, converted in the launch's format: Triton 3.6's
interpreter has no fp8e4b8 type. A Triton whose internals moved is refused, never trusted (known_answers.py).
"""

from __future__ import annotations

import contextlib
import functools
import sys

import numpy as np
import torch

from ..core import fp8
from ..core.errors import ProducerError
from ..core.spec import FP8Format
from . import compiled_numerics

# releases whose interpreter internals were read (the patch targets are also checked at run time)
TESTED_TRITON = ("3.4", "3.5", "3.6", "3.7", "3.8", "3.9")

_SCOPE: dict[str, object] = {"depth": 0, "fnuz": False}  # fnuz: this launch's e4m3fn-typed bytes are e4m3fnuz


class ExactConversionError(ProducerError):
    """The interpreter's FP8 conversion could not be made exact: no CPU Triton run may be trusted."""


def _triton_version() -> str:
    import triton
    return triton.__version__


def _internals():
    """(tl, interpreter module, JITFunction, InterpretedFunction) of a Triton whose internals were read."""
    version = _triton_version()
    if not version.startswith(TESTED_TRITON):
        raise ExactConversionError(f"Triton {version}: the interpreter's FP8 conversion is patched only for"
                                   f" Triton {', '.join(TESTED_TRITON)}; its internals may have moved")
    try:
        import triton.language as tl
        from triton.runtime import interpreter
        from triton.runtime.jit import JITFunction
    except ImportError as exc:
        raise ExactConversionError(f"Triton {version}: interpreter not importable ({exc})") from None
    builder = getattr(interpreter, "InterpreterBuilder", None)
    needed = ("create_fp_to_fp", "create_masked_load", "create_masked_store")
    if builder is None or not all(hasattr(builder, n) for n in needed) or not hasattr(interpreter, "TensorHandle"):
        raise ExactConversionError(f"Triton {version}: InterpreterBuilder.create_fp_to_fp not found")
    return tl, interpreter, JITFunction, interpreter.InterpretedFunction


def _tensors(args, kwargs):
    return [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) or hasattr(a, "data_ptr")]


def run_on_cpu(fn, args: tuple, kwargs: dict, *, grid):
    """Run a Triton kernel's `fn` over `grid` in cpu_kernels(): the one place a kernel runs on the CPU."""
    _, interpreter, _, interpreted = _internals()
    dtypes = {t.dtype for t in _tensors(args, kwargs) if isinstance(t, torch.Tensor)}
    fnuz = torch.float8_e4m3fnuz in dtypes
    if fnuz and torch.float8_e4m3fn in dtypes:
        raise ExactConversionError("a kernel given both e4m3fn and e4m3fnuz tensors cannot run on the CPU:"
                                   " fp8check converts in one FP8 format per launch")

    def typed(a):
        return a.view(torch.float8_e4m3fn) if isinstance(a, torch.Tensor) and a.dtype == torch.float8_e4m3fnuz else a

    args, kwargs = tuple(map(typed, args)), {key: typed(value) for key, value in kwargs.items()}
    args, kwargs = compiled_numerics.runtime_arguments(fn, args, kwargs)
    # numpy's floating-point warnings (0/0, inf - inf) are the kernel's own NaN and inf, computed as compiled code
    # computes them: not the checker's to print
    with cpu_kernels(), np.errstate(all="ignore"):
        previous, _SCOPE["fnuz"] = _SCOPE["fnuz"], fnuz
        try:
            return _SCOPE["interpreted_run"](interpreted(fn), *args, grid=grid, warmup=False, **kwargs)
        finally:
            _SCOPE["fnuz"] = previous


@contextlib.contextmanager
def scope_for(device: torch.device, *, grid: bool = True):
    """The scope a producer or reader runs in on `device`: cpu_kernels() on the CPU once Triton is imported
    (a module that launches kernels has imported it) and is one whose internals were read, else none. In
    it, a grid runs all its programs at once where it can (grid.py), or with grid=False program by program
    (--interpreter sequential). Yields the list of GridRun records of the grids it runs: how each ran."""
    from .grid import GridRun, grid_at_once

    mine: list = []
    try:
        usable = device.type == "cpu" and "triton" in sys.modules and _internals() is not None
    except ExactConversionError:  # require() refuses Triton producers here; others run without kernels
        usable = False
    if not usable:
        yield mine
    elif not grid:
        def started(done: int, total: int) -> None:
            if done == 1:
                mine.append(GridRun("a grid", total, 0, "--interpreter sequential"))

        with cpu_kernels(), program_listener(started):
            yield mine
    else:
        with cpu_kernels(), grid_at_once() as runs:
            before = len(runs)  # an enclosing scope shares its list
            try:
                yield mine
            finally:
                mine.extend(runs[before:])


def _exact_fp_to_fp(tl, handle_cls, original):
    """The interpreter's fp -> fp conversion with E4M3 on either side done by fp8.encode / fp8.decode."""
    widths = {tl.float32: np.float32, tl.float16: np.float16, tl.float64: np.float64, tl.bfloat16: np.uint16}

    def fmt_of(scalar):
        if scalar == tl.float8e4nv:
            return FP8Format.E4M3FNUZ if _SCOPE["fnuz"] else FP8Format.E4M3FN
        return FP8Format.E4M3FNUZ if scalar == tl.float8e4b8 else None

    @functools.wraps(original)
    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        src_type, dst = src.dtype.scalar, dst_type.scalar
        to_fmt, from_fmt = fmt_of(dst), fmt_of(src_type)
        if to_fmt is not None and src_type in widths:
            if src_type == tl.bfloat16:  # bf16 is held as uint16 bits: widen exactly to fp32
                values = (src.data.astype(np.uint32) << 16).view(np.float32)
            else:
                values = src.data if src_type == tl.float64 else src.data.astype(np.float32)
            encoded = fp8.encode(torch.from_numpy(np.ascontiguousarray(values)), to_fmt).numpy()
            return handle_cls(encoded.reshape(src.data.shape), dst)
        if from_fmt is not None and dst in widths:
            codes = torch.from_numpy(np.ascontiguousarray(src.data).view(np.uint8))
            values = fp8.decode(codes, from_fmt).numpy().reshape(src.data.shape)  # exact in every wider type
            if dst == tl.bfloat16:
                return handle_cls((values.view(np.uint32) >> 16).astype(np.uint16), dst)
            return handle_cls(values.astype(widths[dst]), dst)
        return original(self, src, dst_type, rounding_mode)

    return create_fp_to_fp


def _mask_fix(handle_cls, load, store):
    """Masks that are int1 to Triton but int32 in numpy (a block int1 `&` a scalar int1, e.g. vLLM's
    `(pos < seq_len) & (logical_blk < max_blocks)`) make the stock interpreter's masked load and store
    fail ("mask has unsupported dtype"); compiled Triton takes them. Those calls get the int1 values (the
    low bit) as numpy bools; proven by the semantics kernel."""
    def as_bool(mask):
        if mask.data.dtype == np.bool_:
            return mask
        return handle_cls((mask.data & 1).astype(np.bool_), mask.dtype.scalar)

    @functools.wraps(load)
    def create_masked_load(self, ptrs, mask, *rest):  # rest: other, cache and volatility (by release)
        return load(self, ptrs, as_bool(mask), *rest)

    @functools.wraps(store)
    def create_masked_store(self, ptrs, value, mask, *rest):
        return store(self, ptrs, value, as_bool(mask), *rest)

    return create_masked_load, create_masked_store


def _language_state() -> dict:
    """The attributes of triton.language's modules and their classes: what the interpreter leaves patched."""
    modules = [m for name, m in list(sys.modules.items()) if m is not None and name.startswith("triton.language")]
    owners = {id(m): m for m in modules}
    owners.update((id(v), v) for m in modules for v in list(vars(m).values())
                  if isinstance(v, type) and getattr(v, "__module__", "").startswith("triton.language"))
    return {owner: dict(vars(owner)) for owner in owners.values()}


def _restore(state: dict) -> None:
    """Every attribute that was there before is put back, and a class's new ones taken out. A module's
    new names stay: the interpreter adds its own globals to the modules of the functions it rewrites,
    once, and caches the rewrite."""
    for owner, saved in state.items():
        current = vars(owner)
        if isinstance(owner, type):
            for name in [n for n in current if n not in saved]:
                delattr(owner, name)
        for name, value in saved.items():
            if name not in current or current[name] is not value:
                setattr(owner, name, value)


def _scalar_index_fix(original):
    """Triton before 3.9 turns a scalar into a Python int by int() of its one-element array, which numpy
    2.4 refuses ("only 0-dimensional arrays can be converted"): a loop bound or index taken from a kernel
    argument then fails. .item() reads the one element under every numpy."""

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    return patch_lang_tensor


@contextlib.contextmanager
def cpu_kernels():
    """Within the block: kernels launched on CPU tensors run in the exact interpreter (run_on_cpu), those on
    GPU tensors compile as usual. Re-entrant; on exit Triton is as it was. ExactConversionError where
    Triton's internals are not the ones read."""
    if _SCOPE["depth"]:  # an enclosing block has patched Triton and restores it
        yield
        return
    tl, interpreter, jit_function, interpreted = _internals()
    builder, handle_cls = interpreter.InterpreterBuilder, interpreter.TensorHandle
    jit_run, interpreted_run = jit_function.run, interpreted.run

    def launch(original):
        def run(self, *args, grid, warmup, **kwargs):
            if warmup or all(getattr(getattr(t, "device", None), "type", None) != "cpu"
                                 for t in _tensors(args, kwargs)):
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            return run_on_cpu(self.fn, args, kwargs, grid=grid)

        return run

    def device_call(self, *args, **kwargs):  # a @triton.jit helper called from an interpreted kernel
        return interpreted(self.fn)(*args, **kwargs)

    load, store = _mask_fix(handle_cls, builder.create_masked_load, builder.create_masked_store)
    patches = [(interpreter, "_patch_lang_tensor", _scalar_index_fix(interpreter._patch_lang_tensor))] \
        if hasattr(interpreter, "_patch_lang_tensor") else []
    patches += [(builder, "create_fp_to_fp", _exact_fp_to_fp(tl, handle_cls, builder.create_fp_to_fp)),
               (builder, "create_masked_load", load), (builder, "create_masked_store", store),
               (jit_function, "run", launch(jit_run)), (jit_function, "__call__", device_call),
               (interpreted, "run", launch(interpreted_run))]
    patches += compiled_numerics.patches(interpreter, amd=lambda: _SCOPE["fnuz"])
    state = _language_state()
    state.update({owner: dict(vars(owner)) for owner, _, _ in patches})
    _SCOPE.update(depth=1, interpreted_run=interpreted_run)
    try:
        for owner, name, value in patches:
            setattr(owner, name, value)
        yield
    finally:
        _restore(state)
        _SCOPE.update(depth=0, fnuz=False)


@contextlib.contextmanager
def program_listener(fn):
    """Within the block, `fn(done, total)` is called as each interpreted program starts (for progress bars):
    the interpreter's grid bookkeeping is wrapped for the block only."""
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    set_dim, set_idx = vars(builder)["set_grid_dim"], vars(builder)["set_grid_idx"]
    counts = {"done": 0, "total": 0}

    def set_grid_dim(self, nx, ny, nz):
        counts.update(done=0, total=nx * ny * nz)
        return set_dim(self, nx, ny, nz)

    def set_grid_idx(self, x, y, z):
        counts["done"] += 1
        fn(counts["done"], counts["total"])
        return set_idx(self, x, y, z)

    builder.set_grid_dim, builder.set_grid_idx = set_grid_dim, set_grid_idx
    try:
        yield
    finally:
        builder.set_grid_dim, builder.set_grid_idx = set_dim, set_idx
