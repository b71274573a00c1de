"""The values and language of one batched grid (grid.py): Python ints that differ between the programs of
a batch (ProgramInts, ProgramBools), the exceptions that end a batched run, and the reductions, scans,
ranges and language patches of one grid, undone after it."""

from __future__ import annotations

import contextlib
import inspect
import numbers

import numpy as np


class Unsupported(Exception):
    """The grid cannot run at once; it runs sequentially. The message says why (one line)."""


class _Diverge(Exception):
    """The programs of a batch disagree on a value Python needs concretely: split them by it."""

    def __init__(self, values: np.ndarray):
        super().__init__("diverge")
        self.values = values


_INT_LIMIT = 1 << 62  # beyond this an int64 could overflow where a Python int would not


def _uniform(values: np.ndarray):
    """The value when every program agrees, else raise _Diverge."""
    first = values[0]
    if values.shape[0] == 1 or bool((values == first).all()):
        return first
    raise _Diverge(values)


class ProgramInts:
    """A Python int per program (a loop variable whose bounds differ between programs): Python int
    arithmetic elementwise; a tensor with the dtype `to_tensor` gives that int where a tensor is needed."""

    __slots__ = ("values",)

    def __init__(self, values: np.ndarray):
        if values.size and int(np.abs(values).max()) >= _INT_LIMIT:
            raise Unsupported("a loop variable beyond 2**62")
        self.values = values

    @staticmethod
    def _operand(other):
        if isinstance(other, ProgramInts):
            return other.values
        if not isinstance(other, int):  # bool included, as in Python
            return None
        if abs(other) >= _INT_LIMIT:
            raise Unsupported("a Python int beyond 2**62 next to a loop variable")
        return np.int64(other)

    def _binary(self, other, op, reflected=False, compare=False):
        rhs = self._operand(other)
        if rhs is None:
            return NotImplemented
        lhs, rhs = (rhs, self.values) if reflected else (self.values, rhs)
        if op is np.multiply and max(int(np.abs(lhs).max()), int(np.abs(rhs).max())) >= 1 << 31:
            raise Unsupported("a product of loop variables beyond 2**31")
        if op in (np.left_shift, np.right_shift) and (
                bool((np.asarray(rhs) < 0).any()) or op is np.left_shift and (
                    int(np.asarray(rhs).max()) > 30 or int(np.abs(lhs).max()) >= 1 << 31)):
            raise Unsupported("a shift of a loop variable beyond 2**62 or by a negative count")
        if op in (np.floor_divide, np.remainder) and bool((np.asarray(rhs) == 0).any()):
            raise Unsupported("a loop variable divided by zero")
        result = op(lhs, rhs)
        logical = op in (np.bitwise_and, np.bitwise_or, np.bitwise_xor) and isinstance(self, ProgramBools) \
            and (isinstance(other, ProgramBools) or isinstance(other, bool))  # True & False is a bool
        if compare or logical:
            return ProgramBools(np.asarray(result))
        return ProgramInts(np.asarray(result, dtype=np.int64))

    __hash__ = None

    def __index__(self):
        return int(_uniform(self.values))

    __int__ = __index__

    def __bool__(self):
        return bool(_uniform(self.values != 0))

    def __repr__(self):
        return f"ProgramInts({self.values.tolist()})"


class ProgramBools(ProgramInts):
    """A Python bool per program (a comparison of a loop variable)."""

    def __init__(self, values: np.ndarray):
        self.values = values.astype(np.bool_)

    def __bool__(self):
        return bool(_uniform(self.values))


# Python's int operators, elementwise: // floors and % takes the divisor's sign, as for ints
for _name, _op in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("floordiv", np.floor_divide),
                   ("mod", np.remainder), ("and", np.bitwise_and), ("or", np.bitwise_or),
                   ("xor", np.bitwise_xor), ("lshift", np.left_shift), ("rshift", np.right_shift)):
    setattr(ProgramInts, f"__{_name}__", lambda s, o, op=_op: s._binary(o, op))
    setattr(ProgramInts, f"__r{_name}__", lambda s, o, op=_op: s._binary(o, op, True))
for _name, _op in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                   ("eq", np.equal), ("ne", np.not_equal)):
    setattr(ProgramInts, f"__{_name}__", lambda s, o, op=_op: s._binary(o, op, compare=True))
for _name, _op in (("neg", np.negative), ("pos", np.positive), ("abs", np.abs)):
    setattr(ProgramInts, f"__{_name}__", lambda s, op=_op: ProgramInts(op(s.values.astype(np.int64))))
numbers.Integral.register(ProgramInts)  # Triton's binary operators treat it as the Python int it stands for


# tl.standard's combine functions that numpy computes: reductions (value, index) and scans
_ARGMIN, _ARGMAX = (np.nanmin, np.nanargmin), (np.nanmax, np.nanargmax)
_REDUCTIONS = {"_argmin_combine_tie_break_left": _ARGMIN, "_argmin_combine_tie_break_fast": _ARGMIN,
               "_argmax_combine_tie_break_left": _ARGMAX, "_argmax_combine_tie_break_fast": _ARGMAX,
               "_elementwise_max": (np.nanmax, None), "_elementwise_min": (np.nanmin, None),
               "_sum_combine": (np.sum, None)}
_SCANS = {"_sum_combine": np.cumsum, "_prod_combine": np.cumprod}
_ABSENT = object()


def _numpy_for(table: dict, tl, combine_fn):
    return next((op for name, op in table.items() if getattr(tl.standard, name, None) is combine_fn), None)


def _per_program(op, data: np.ndarray, axis, keep_dims: bool) -> np.ndarray:
    """op over each program's block, reducing in the order the sequential interpreter does: the same numpy
    call on the same layout (one call for all programs where each program's block is a C-contiguous row)."""
    if len(data) == 1:
        return np.asarray(op(data[0], axis=axis, keepdims=keep_dims))[None]
    if data.flags.c_contiguous and axis is None:
        flat = np.asarray(op(data.reshape(len(data), -1), axis=1))
        return flat.reshape((-1,) + (1,) * (data.ndim - 1)) if keep_dims else flat
    if data.flags.c_contiguous and (axis == data.ndim - 2 or axis == -1):
        return np.asarray(op(data, axis=data.ndim - 1, keepdims=keep_dims))
    return np.stack([np.asarray(op(data[p], axis=axis, keepdims=keep_dims)) for p in range(len(data))])


def _reduce_and_scan(interpreter, tl):
    """tl.reduce, and tl.associative_scan for the interpreter's own fast cases (cumsum, cumprod): numpy's
    accumulate along the block axis, which adds in order whatever the layout; other combine functions run
    sequentially."""
    def to_tensor(result: np.ndarray, dtype):
        result = result.astype(interpreter._get_np_dtype(dtype))
        shape = list(result.shape[1:])
        handle = interpreter.TensorHandle(result, dtype.scalar)
        return tl.core.tensor(handle, tl.block_type(dtype, shape) if shape else dtype)

    def reduce(input, axis, combine_fn, keep_dims=False, **kwargs):
        ops = _numpy_for(_REDUCTIONS, tl, combine_fn)
        if ops is None:
            name = getattr(combine_fn, "__name__", combine_fn)
            raise Unsupported(f"tl.reduce with combine function {name}")
        first = input[0] if isinstance(input, tuple) else input
        if axis is not None and not -len(first.shape) <= axis < len(first.shape):
            raise Unsupported(f"tl.reduce over axis {axis} of a {len(first.shape)}-d block")
        results = [to_tensor(_per_program(op, first.handle.data, axis, keep_dims), dtype)
                   for op, dtype in zip(ops, (first.dtype, tl.int32)) if op is not None]
        if isinstance(input, tuple):
            if len(input) != len(results):
                raise Unsupported("tl.reduce over a tuple with a non-standard combine function")
            return tuple(results)
        return results[0]

    def scan(input, axis, combine_fn, reverse=False, **kwargs):
        if isinstance(input, tuple):
            if len(input) != 1:
                raise Unsupported("tl.associative_scan over a tuple")
            return (scan(input[0], axis, combine_fn, reverse),)
        op = _numpy_for(_SCANS, tl, combine_fn)
        if op is None or not isinstance(axis, int) or not -len(input.shape) <= axis < len(input.shape):
            raise Unsupported(f"tl.associative_scan with {getattr(combine_fn, '__name__', combine_fn)}")
        data_axis = axis if axis < 0 else axis + 1
        flip = (lambda a: np.ascontiguousarray(np.flip(a, axis=data_axis))) if reverse else (lambda a: a)
        return to_tensor(flip(op(flip(input.handle.data), axis=data_axis)), input.dtype)

    return reduce, scan


def _tensor_values(tensor) -> np.ndarray:
    """Each program's value of a tensor that holds one element per program."""
    data = tensor.handle.data
    flat = data.reshape(len(data), -1)
    if flat.shape[1] != 1:
        raise Unsupported("a block used where Python needs one value")
    return flat[:, 0]


def _int_values(value):
    """A loop bound as an int (the same in every program) or an int64 vector (one per program)."""
    import triton.language as tl

    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, ProgramInts):
        return value.values
    if isinstance(value, tl.tensor):
        values = _tensor_values(value)
        if values.dtype == np.uint64 and bool((values >= _INT_LIMIT).any()):
            raise Unsupported("a loop bound beyond 2**62")
        values = values.astype(np.int64)
        return int(values[0]) if bool((values == values[0]).all()) else values
    return int(value)


def _range(arg1, arg2=None, step=None, **kwargs):
    """tl.range / tl.static_range: Python's range where every program agrees on the bounds; a range of
    ProgramInts where they agree only on the trip count; a divergence otherwise."""
    step = 1 if step is None else step
    start, end = (0, arg1) if arg2 is None else (arg1, arg2)
    bounds = [_int_values(v) for v in (start, end, step)]
    if all(isinstance(b, int) for b in bounds):
        return range(*bounds)
    s, e, st = np.broadcast_arrays(*(np.asarray(b, dtype=np.int64).reshape(-1) for b in bounds))
    if bool((st == 0).any()):
        raise Unsupported("a loop with step 0")
    trips = np.where(st > 0, np.maximum(0, -((s - e) // st)), np.maximum(0, -((e - s) // -st)))
    count = int(_uniform(trips))
    if bool((s == s[0]).all()) and bool((st == st[0]).all()):
        return range(int(s[0]), int(s[0]) + count * int(st[0]), int(st[0]))
    return (ProgramInts(s + k * st) for k in range(count))


@contextlib.contextmanager
def _batched_language(interpreter, builder):
    """triton.language patched as the interpreter patches it, then the batch-aware pieces on top, set on
    their owners for the grid and restored after it (an attribute that was not the owner's own removed)."""
    import triton.language as tl
    lang_scope = interpreter._LangPatchScope()
    saved: list[tuple[object, str, object]] = []

    def patch_builtins(package) -> None:
        """The interpreter's _patch_builtin, also over builtins an earlier device-function call left patched
        (Triton's InterpretedFunction.__call__ patches without restoring; 3.6-3.8 bind the builder there)."""
        for name, member in inspect.getmembers(package):
            patched = (getattr(member, "__kwdefaults__", None) or {}).get("member")  # by an earlier call
            original = member if tl.core.is_builtin(member) else patched
            if original is not None and tl.core.is_builtin(original):
                interpreter._patch_attr(package, name, original, builder, lang_scope)

    def transpose(self):
        if len(self.shape) != 2:
            raise Unsupported(".T of a block that is not 2-d")
        handle = interpreter.TensorHandle(np.swapaxes(self.handle.data, -1, -2), self.handle.dtype)
        return tl.core.tensor(handle, tl.core.block_type(self.dtype, [self.shape[1], self.shape[0]]))

    try:
        # the builder given here is the one Triton 3.6-3.8's builtins use; 3.9's use interpreter_semantic's
        for lang in (tl, tl.core):
            patch_builtins(lang)
            patch_builtins(lang.tensor)
            interpreter._patch_lang_tensor(lang.tensor, lang_scope)
            interpreter._patch_lang_core(lang, lang_scope)
        patch_builtins(tl.math)
        if hasattr(tl.core, "tensor_descriptor_base"):
            patch_builtins(tl.core.tensor_descriptor_base)
        semantic = interpreter.interpreter_semantic
        reduce, scan = _reduce_and_scan(interpreter, tl)
        ours = [(semantic, "builder", builder), *_semantic_patches(type(semantic), interpreter, tl)]
        ours += [(lang, name, value) for lang in (tl, tl.core)
                 for name, value in (("reduce", reduce), ("associative_scan", scan))]
        ours += [(lang, name, _range) for lang in {tl, tl.core} for name in ("range", "static_range")
                 if hasattr(lang, name)]

        def device_call(self, *args, **kwargs):  # a @triton.jit helper called from a kernel: language patched
            try:
                return self.rewrite()(*args, **kwargs)
            except (Unsupported, _Diverge):
                raise
            except Exception as exc:
                raise interpreter.InterpreterError(repr(exc)) from exc

        ours += [(tl.tensor, "__bool__", _tensor_bool), (tl.tensor, "T", property(transpose)),
                 (tl.tensor, "__index__", lambda self: int(_uniform(_tensor_values(self)))),
                 (interpreter.InterpretedFunction, "__call__", device_call)]
        for owner, name, value in ours:
            saved.append((owner, name, vars(owner).get(name, _ABSENT)))
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, old in reversed(saved):
            if old is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        lang_scope.restore()


def _tensor_bool(self):
    if self.handle.data[0].size != 1:  # a block is truthy in the interpreter, as there
        return True
    return bool(_uniform(self.handle.data.reshape(len(self.handle.data)).astype(np.bool_)))


def _semantic_patches(semantic_cls, interpreter, tl) -> list[tuple[object, str, object]]:
    """Make ProgramInts convert to tensors exactly where, and with the dtype with which, a Python int would.
    Patched on the class: Triton 3.6-3.8 give every builtin its own semantic object."""
    to_tensor, scalar_constant = semantic_cls.to_tensor, semantic_cls.scalar_constant
    to_tensor_type = getattr(semantic_cls, "to_tensor_type", None)  # Triton 3.9; 3.6-3.8 convert in to_tensor

    def program_tensor(value: ProgramInts, dtype):
        if isinstance(value, ProgramBools):
            dtype = tl.int1 if dtype is None else dtype
        if dtype.is_floating() and (dtype not in (tl.float16, tl.float32, tl.float64)
                                    or int(np.abs(value.values).max()) >= 1 << 53):
            raise Unsupported(f"a loop variable converted to {dtype}")  # numpy's own conversion only
        data = value.values.astype(np.float64) if dtype.is_floating() else value.values
        data = data.astype(interpreter._get_np_dtype(dtype))
        return tl.tensor(interpreter.TensorHandle(data, dtype), dtype)

    def program_dtype(x):  # what to_tensor_type gives each program's int: one dtype for all, or diverge
        if isinstance(x, ProgramBools):
            return tl.int1
        v = x.values
        classes = np.select([(v >= -2**31) & (v < 2**31), (v >= 2**31) & (v < 2**32)], [0, 1], 2)
        return (tl.int32, tl.uint32, tl.int64)[int(_uniform(classes))]

    def new_to_tensor(self, x, check_type=True):
        if isinstance(x, ProgramInts):
            return program_tensor(x, program_dtype(x))
        return to_tensor(self, x, check_type)

    def new_to_tensor_type(self, x):
        return program_dtype(x) if isinstance(x, ProgramInts) else to_tensor_type(self, x)

    def new_scalar_constant(self, value, dtype):
        if isinstance(value, ProgramInts):
            return program_tensor(value, dtype)
        return scalar_constant(self, value, dtype)

    patches = [(semantic_cls, "to_tensor", new_to_tensor),
               (semantic_cls, "scalar_constant", new_scalar_constant)]
    return patches + ([(semantic_cls, "to_tensor_type", new_to_tensor_type)] if to_tensor_type else [])
