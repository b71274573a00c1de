"""Triton's CPU interpreter, a whole grid at a time: the same bytes as program after program, faster.

Triton's interpreter runs a grid one program after another, and each program pays ~2.5 ms of Python in
Triton's semantic layer (~45 us per `tl` operation), so a writer with one program per token runs a few
hundred tokens per second. Here the programs of a grid run in lockstep as one batch: `tl.program_id`
is a vector, every value's numpy data carries a leading program axis (scalars `[P]`, blocks `[P, ...]`;
a value the same in every program keeps a leading axis of 1), elementwise operations broadcast,
reductions, reshapes, transposes and `tl.dot` shift their axes by one, and loads and stores gather and
scatter through the real memory with their masks. The per-operation Python is paid once per batch.

Control flow. Where Python asks for a concrete value (`if` / early `return` on a tensor, `int()`,
a loop bound) and the programs of a batch disagree, the batch is split by that value and each part runs
again from the start on its own path. A `tl.range` whose bounds differ between programs but whose trip
count does not runs once for all, its loop variable a vector of Python ints (`ProgramInts`, Python int
arithmetic per program) that becomes a tensor exactly where a Python int would.

Why the bytes are those of the sequential interpreter. Every program executes exactly the operations
of its own path, in its own order, with the interpreter's own numpy functions (a reduction calls numpy
on each program's block, or once on all where every block is a C-contiguous row, which numpy reduces
row by row as it reduces one block; the differential tests hold it to that). Only the order
*between* programs changes, and after the grid two facts are checked on what it did: no byte that any
program stored was loaded by any program (so every load saw the memory as it was before the grid), and
no byte was stored by two programs (so the final bytes do not depend on their order). Both hold for
every kernel whose programs are independent, which is what a GPU assumes too. When either fails, when
an operation is used that this module does not implement (atomics, custom scans, prints, block pointers,
tensor descriptors, any builder method it does not know), when a private Triton name it relies on
moved, or when the kernel raises, the stores are undone and the grid runs in Triton's sequential
interpreter; the grid's `GridRun` record says why.

Active only inside `grid_at_once()`, which patches `GridExecutor.__call__` for its duration.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import numbers

import numpy as np

# Private names of triton.runtime.interpreter this module builds on (checked by `available()`).
REQUIRED_NAMES = ("InterpreterBuilder", "TensorHandle", "GridExecutor", "InterpretedFunction",
                  "interpreter_semantic", "interpreter_builder", "_patch_attr", "_patch_lang_tensor",
                  "_patch_lang_core", "_implicit_cvt", "_get_np_dtype", "_convert_float", "_LangPatchScope",
                  "InterpreterError")
_LOG = logging.getLogger(__name__)  # one line per grid handed to the sequential interpreter, with the reason
BATCH_PROGRAMS = 4096  # programs per batch: bounds memory ([P, block] arrays), large enough to amortise


class Unsupported(Exception):
    """The grid cannot run at once; it runs sequentially. The message says why (one line)."""


class _Diverge(Exception):
    """The programs of a batch disagree on a value Python needs concretely: split them by it."""

    def __init__(self, values: np.ndarray):
        super().__init__("diverge")
        self.values = values


@dataclasses.dataclass(frozen=True)
class GridRun:
    """How one interpreted grid ran: at once (`sequential_reason` None) or program by program."""

    kernel: str
    programs: int
    batches: int
    sequential_reason: str | None

    def note(self) -> str:
        if self.sequential_reason is None:
            return f"{self.kernel}: {self.programs} programs run grid-at-once in {self.batches} batches"
        return f"{self.kernel}: {self.programs} programs run sequentially: {self.sequential_reason}"


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


# ---- per-program Python ints ------------------------------------------------------------------------------
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

    __add__ = lambda s, o: s._binary(o, np.add)
    __radd__ = lambda s, o: s._binary(o, np.add, True)
    __sub__ = lambda s, o: s._binary(o, np.subtract)
    __rsub__ = lambda s, o: s._binary(o, np.subtract, True)
    __mul__ = lambda s, o: s._binary(o, np.multiply)
    __rmul__ = lambda s, o: s._binary(o, np.multiply, True)
    __floordiv__ = lambda s, o: s._binary(o, np.floor_divide)  # Python's floor, as for ints
    __rfloordiv__ = lambda s, o: s._binary(o, np.floor_divide, True)
    __mod__ = lambda s, o: s._binary(o, np.remainder)  # Python's sign of the divisor
    __rmod__ = lambda s, o: s._binary(o, np.remainder, True)
    __and__ = lambda s, o: s._binary(o, np.bitwise_and)
    __rand__ = lambda s, o: s._binary(o, np.bitwise_and, True)
    __or__ = lambda s, o: s._binary(o, np.bitwise_or)
    __ror__ = lambda s, o: s._binary(o, np.bitwise_or, True)
    __xor__ = lambda s, o: s._binary(o, np.bitwise_xor)
    __rxor__ = lambda s, o: s._binary(o, np.bitwise_xor, True)
    __lshift__ = lambda s, o: s._binary(o, np.left_shift)
    __rlshift__ = lambda s, o: s._binary(o, np.left_shift, True)
    __rshift__ = lambda s, o: s._binary(o, np.right_shift)
    __rrshift__ = lambda s, o: s._binary(o, np.right_shift, True)
    __lt__ = lambda s, o: s._binary(o, np.less, compare=True)
    __le__ = lambda s, o: s._binary(o, np.less_equal, compare=True)
    __gt__ = lambda s, o: s._binary(o, np.greater, compare=True)
    __ge__ = lambda s, o: s._binary(o, np.greater_equal, compare=True)
    __eq__ = lambda s, o: s._binary(o, np.equal, compare=True)
    __ne__ = lambda s, o: s._binary(o, np.not_equal, compare=True)
    __hash__ = None

    def __neg__(self):
        return ProgramInts(-self.values.astype(np.int64))

    def __pos__(self):
        return ProgramInts(self.values.astype(np.int64))

    def __abs__(self):
        return ProgramInts(np.abs(self.values.astype(np.int64)))

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


numbers.Integral.register(ProgramInts)  # Triton's binary operators treat it as the Python int it stands for


def _int_dtype_class(values: np.ndarray):
    """The dtype Triton's to_tensor_type gives each program's int: one for all, or diverge."""
    import triton.language as tl

    classes = np.select([(values >= -2**31) & (values < 2**31), (values >= 2**31) & (values < 2**32)], [0, 1], 2)
    return (tl.int32, tl.uint32, tl.int64)[int(_uniform(classes))]


# ---- the batched builder ----------------------------------------------------------------------------------
# Builder methods of Triton's interpreter that compute elementwise on numpy data of any shape (read in
# Triton 3.6-3.9): with a leading program axis they compute every program's value at once. A builder
# method not named here and not overridden below raises Unsupported, so an interpreter that grew or
# changed an operation runs sequentially instead of guessing.
ELEMENTWISE = frozenset("""
create_add create_sub create_mul create_sdiv create_udiv create_srem create_urem create_idiv create_fadd create_fsub
create_fmul create_fdiv create_frem create_fneg create_precise_divf create_approx_divf create_shl create_lshr
create_ashr create_and create_or create_xor create_minsi create_minui create_minimumf create_minnumf create_maxsi
create_maxui create_maximumf create_maxnumf create_icmpSLE create_icmpSLT create_icmpSGE create_icmpSGT
create_icmpULE create_icmpULT create_icmpUGE create_icmpUGT create_icmpEQ create_icmpNE create_fcmpOLT
create_fcmpOGT create_fcmpOLE create_fcmpOGE create_fcmpOEQ create_fcmpONE create_fcmpULT create_fcmpUGT
create_fcmpULE create_fcmpUGE create_fcmpUEQ create_fcmpUNE create_umulhi create_select create_clampf create_fma
create_cos create_sin create_exp create_exp2 create_log create_log2 create_sqrt create_precise_sqrt create_rsqrt
create_fabs create_iabs create_floor create_ceil create_erf create_si_to_fp create_ui_to_fp create_fp_to_si
create_fp_to_ui create_fp_ext create_fp_trunc create_int_cast create_fp_to_fp create_bitcast create_int_to_ptr
create_ptr_to_int create_addptr create_dot create_join create_split create_barrier create_assume create_load
create_store create_get_num_programs get_cache_policy get_null_value get_all_ones_value binary_op ternary_op
unary_op cast_impl set_grid_idx set_grid_dim
""".split())


def _lead(data: np.ndarray) -> int:
    return data.shape[0]


def _bool_mask(data: np.ndarray) -> np.ndarray:
    return data if data.dtype == np.bool_ else (data & 1).astype(np.bool_)


class _Batch:
    """What one run of the grid did: how to undo its stores, and the loads and stores of completed batches."""

    def __init__(self, storages: list[tuple[int, int, object]]):
        self.storages = storages  # (first byte, end, uint8 tensor over it) of every tensor argument's storage
        self.snapshots: dict[int, tuple[object, object]] = {}  # storage start -> (tensor, copy before the grid)
        self.gathered: list[tuple[np.ndarray, np.ndarray, np.ndarray, object]] = []  # stores elsewhere: old values
        self.load_ranges: list[tuple[int, int]] = []
        self.stores: list[_Stored] = []
        self.attempt_loads: list[tuple[int, int]] = []
        self.attempt_stores: list[_Stored] = []
        self.program_ids: np.ndarray = np.zeros(0, dtype=np.int64)  # linear ids of the batch's programs
        self.batch_number = 0

    def gather(self, pointers: np.ndarray, taken: np.ndarray, low: int, high: int, dtype, element):
        """The loaded elements (masked lanes arbitrary) by numpy indexing into the argument storage that
        holds bytes [low, high), the same bytes the interpreter's element-wise load copies; None when no
        argument storage holds them or an element is misaligned there."""
        width = np.dtype(dtype).itemsize
        if dtype == np.bool_ or width * 8 != max(8, element.primitive_bitwidth):
            return None
        for start, end, tensor in self.storages:
            if start <= low and high <= end:
                offsets = pointers - np.uint64(start)
                if bool((offsets % np.uint64(width))[taken].any()):
                    return None
                whole = tensor.numpy()[: (end - start) // width * width].view(dtype)
                index = np.where(taken, offsets // np.uint64(width), np.uint64(0)).astype(np.intp)
                return whole[index]
        return None

    def keep_for_undo(self, low: int, high: int) -> int | None:
        """Copy the argument storage holding bytes [low, high) once, before the grid's first store to it;
        its first byte, or None when no argument storage holds them."""
        for start, end, tensor in self.storages:
            if start <= low and high <= end:
                if start not in self.snapshots:
                    self.snapshots[start] = (tensor, tensor.clone())
                return start
        return None


@dataclasses.dataclass
class _Stored:
    """One store operation of a batch: its pointers, which lanes stored (None: all), whose they are."""

    pointers: np.ndarray
    taken: np.ndarray | None
    owners: np.ndarray  # per program (rows of `pointers`), or one virtual owner for a store all programs share
    width: int
    low: int
    high: int
    storage: int | None  # first byte of the argument storage holding every stored byte, if one does

    def addresses(self) -> np.ndarray:
        return self.pointers.reshape(-1) if self.taken is None else self.pointers[self.taken]

    def owner_of_each(self) -> np.ndarray:
        owners = np.broadcast_to(self.owners.reshape((-1,) + (1,) * (self.pointers.ndim - 1)), self.pointers.shape)
        return owners.reshape(-1) if self.taken is None else owners[self.taken]


def _cache_arguments(method, fixed: int) -> int:
    """How many cache arguments a masked load / store takes (3.6-3.8: two, 3.9: one)."""
    return len(inspect.signature(method).parameters) - fixed


def _make_builder_class(interpreter):
    """InterpreterBuilder with a leading program axis on every value."""
    import triton.language as tl

    base = interpreter.InterpreterBuilder
    handle_cls = interpreter.TensorHandle
    np_dtype = interpreter._get_np_dtype

    load_cache = (None,) * _cache_arguments(base.create_masked_load, 5)

    def unsupported(name):
        def method(self, *args, **kwargs):
            raise Unsupported(f"tl operation {name.removeprefix('create_')} is not run grid-at-once")

        return method

    class BatchBuilder(base):
        def __init__(self, batch: _Batch):
            super().__init__()
            self.batch = batch
            self.program_vectors: tuple[np.ndarray, np.ndarray, np.ndarray] = ()
            self.grid_idx = (0, 0, 0)

        def begin(self, program_ids: np.ndarray, grid: tuple[int, int, int]):
            _, ny, nz = grid
            self.batch.program_ids = program_ids
            coords = (program_ids // (ny * nz), (program_ids // nz) % ny, program_ids % nz)
            vectors = []
            for values in coords:
                values = values.astype(np.int32)
                vectors.append(values[:1] if bool((values == values[0]).all()) else values)
            self.program_vectors = tuple(vectors)

        def create_get_program_id(self, axis):
            return handle_cls(self.program_vectors[axis], tl.int32)

        # memory: the interpreter's own gather and scatter, with every program's pointers at once
        def create_masked_load(self, ptrs, mask, other, *cache_and_volatile):
            arrays = [ptrs.data, mask.data] + ([] if other is None else [other.data])
            arrays = [np.ascontiguousarray(a) for a in np.broadcast_arrays(*arrays)]
            taken = _bool_mask(arrays[1])
            element = ptrs.get_element_ty()
            if not taken.any():
                gathered = None
            else:
                addresses = arrays[0] if taken.all() else arrays[0][taken]
                width = max(1, element.primitive_bitwidth // 8)
                low, high = int(addresses.min()), int(addresses.max()) + width
                self.batch.attempt_loads.append((low, high))
                gathered = self.batch.gather(arrays[0], taken, low, high, np_dtype(element), element)
            if gathered is not None:
                other_data = arrays[2] if other is not None else np.zeros((), dtype=gathered.dtype)
                return handle_cls(np.where(taken, gathered, other_data).astype(gathered.dtype, copy=False), element)
            other_handle = None if other is None else handle_cls(arrays[2], other.dtype)
            return base.create_masked_load(self, handle_cls(arrays[0], ptrs.dtype), handle_cls(arrays[1], mask.dtype),
                                           other_handle, *cache_and_volatile)

        def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
            # the interpreter's own dot, with its fp8 -> fp16 conversion read from a table of that same
            # conversion over all 256 codes (it is elementwise)
            if not any(h.dtype.primitive_bitwidth == 8 and h.dtype.is_floating() for h in (a, b)):
                return base.create_dot(self, a, b, d, input_precision, max_num_imprecise_acc)
            a_data, b_data = (_to_fp16(interpreter, h) for h in (a, b))
            return handle_cls(np.matmul(a_data, b_data, dtype=d.data.dtype) + d.data, d.dtype.scalar)

        def create_masked_store(self, ptrs, value, mask, *cache):
            pointers, values, flags = (np.ascontiguousarray(a) for a in
                                       np.broadcast_arrays(ptrs.data, value.data, mask.data))
            taken = _bool_mask(flags)
            if taken.all():
                taken, addresses = None, pointers
            elif not taken.any():
                return None
            else:
                addresses = pointers[taken]
            width = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
            low, high = int(addresses.min()), int(addresses.max()) + width
            pointer_handle, mask_handle = handle_cls(pointers, ptrs.dtype), handle_cls(flags, mask.dtype)
            storage = self.batch.keep_for_undo(low, high)
            if storage is None:
                old = base.create_masked_load(self, pointer_handle, mask_handle, None, *load_cache, False)
                self.batch.gathered.append((pointers, old.data, flags, ptrs.dtype))
            if _lead(pointers) == 1 and len(self.batch.program_ids) > 1:
                owners = np.array([-1 - self.batch.batch_number], dtype=np.int64)
            else:
                owners = self.batch.program_ids
            self.batch.attempt_stores.append(_Stored(pointers, taken, owners, width, low, high, storage))
            return base.create_masked_store(self, pointer_handle, handle_cls(values, value.dtype), mask_handle, *cache)

        # shapes: the leading program axis stays first
        def create_reshape(self, arg, shape, allow_reorder=False):
            return handle_cls(arg.data.reshape((_lead(arg.data),) + tuple(shape)), arg.dtype.scalar)

        def create_trans(self, arg, perm):
            return handle_cls(np.transpose(arg.data, (0,) + tuple(p + 1 for p in perm)), arg.dtype.scalar)

        def create_expand_dims(self, arg, axis):
            if axis < 0:
                axis += arg.data.ndim
            return handle_cls(np.expand_dims(arg.data, axis + 1), arg.dtype.scalar)

        def create_broadcast(self, arg, shape):
            return handle_cls(np.broadcast_to(arg.data, (_lead(arg.data),) + tuple(shape)), arg.dtype.scalar)

        def create_splat(self, ret_ty, arg):
            shape = tuple(ret_ty.shape)
            first = arg.data.reshape(_lead(arg.data), -1)[:, 0].astype(np_dtype(arg.dtype), copy=False)
            full = np.broadcast_to(first.reshape((-1,) + (1,) * len(shape)), (first.shape[0],) + shape)
            return handle_cls(np.ascontiguousarray(full), arg.dtype.scalar)

        def create_unsplat(self, arg):
            first = arg.data.reshape(_lead(arg.data), -1)[:, 0]
            return handle_cls(first.astype(np_dtype(arg.dtype)), arg.dtype.scalar)

        def create_make_range(self, *args):
            start, stop = args[-2:]
            return handle_cls(np.arange(start, stop, dtype=np.int32)[None], tl.int32)

        def create_cat(self, lhs, rhs):
            lead = max(_lead(lhs.data), _lead(rhs.data))
            parts = [np.broadcast_to(h.data, (lead,) + h.data.shape[1:]) for h in (lhs, rhs)]
            return handle_cls(np.concatenate(parts, axis=1), lhs.dtype.scalar)

        def create_join(self, lhs, rhs):
            lead = max(_lead(lhs.data), _lead(rhs.data))
            parts = [np.broadcast_to(h.data, (lead,) + h.data.shape[1:]) for h in (lhs, rhs)]
            return handle_cls(np.stack(parts, axis=-1), lhs.dtype.scalar)

        def create_gather(self, src, indices, axis):
            lead = max(_lead(src.data), _lead(indices.data))
            data = np.broadcast_to(src.data, (lead,) + src.data.shape[1:])
            index = np.broadcast_to(indices.data, (lead,) + indices.data.shape[1:])
            return handle_cls(np.take_along_axis(data, index, axis=axis + 1), src.dtype.scalar)

        def create_assert(self, condition, message):
            if not bool(np.asarray(condition.data).all()):
                raise Unsupported("a device assertion fails")

    overridden = set(vars(BatchBuilder))
    for name in dir(base):
        if name.startswith(("create_", "get_")) and name not in overridden and name not in ELEMENTWISE \
                and not name.endswith("_ty") and not name.startswith(("get_int", "get_uint", "get_fp", "get_bf16")):
            setattr(BatchBuilder, name, unsupported(name))
    return BatchBuilder


_FP16_TABLES: dict = {}


def _to_fp16(interpreter, handle) -> np.ndarray:
    """The interpreter's _convert_float(data, dtype, fp16) as create_dot calls it; fp8 codes through a
    table of that same function over all 256 codes."""
    import triton.language as tl

    dtype = handle.dtype.scalar
    if dtype.primitive_bitwidth != 8 or not dtype.is_floating():
        return interpreter._convert_float(handle.data, dtype, tl.float16, None).view(np.float16)
    key = str(dtype)
    if key not in _FP16_TABLES:
        codes = np.arange(256, dtype=np.uint8).view(interpreter._get_np_dtype(dtype))
        _FP16_TABLES[key] = interpreter._convert_float(codes, dtype, tl.float16, None).view(np.float16)
    return np.ascontiguousarray(_FP16_TABLES[key][np.ascontiguousarray(handle.data).view(np.uint8)])


# ---- reductions --------------------------------------------------------------------------------------------
def _reduce_function(tl, combine_fn):
    standard = tl.standard
    table = [
        (("_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast"), (np.nanmin, np.nanargmin)),
        (("_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast"), (np.nanmax, np.nanargmax)),
        (("_elementwise_max",), (np.nanmax, None)),
        (("_elementwise_min",), (np.nanmin, None)),
        (("_sum_combine",), (np.sum, None)),
    ]
    for names, ops in table:
        if any(getattr(standard, name, None) is combine_fn for name in names):
            return ops
    raise Unsupported(f"tl.reduce with combine function {getattr(combine_fn, '__name__', combine_fn)}")


def _per_program(op, data: np.ndarray, axis, keep_dims: bool) -> np.ndarray:
    """op over each program's block, reducing in the order the sequential interpreter does: the same numpy
    call on the same layout (one call for all programs where each program's block is a C-contiguous row)."""
    if _lead(data) == 1:
        return np.asarray(op(data[0], axis=axis, keepdims=keep_dims))[None]
    if data.flags.c_contiguous and axis is None:
        flat = np.asarray(op(data.reshape(_lead(data), -1), axis=1))
        return flat.reshape((-1,) + (1,) * (data.ndim - 1)) if keep_dims else flat
    if data.flags.c_contiguous and (axis == data.ndim - 2 or axis == -1):
        return np.asarray(op(data, axis=data.ndim - 1, keepdims=keep_dims))
    return np.stack([np.asarray(op(data[p], axis=axis, keepdims=keep_dims)) for p in range(_lead(data))])


def _make_reduce(interpreter, tl):
    handle_cls = interpreter.TensorHandle

    def to_tensor(result: np.ndarray, dtype):
        result = result.astype(interpreter._get_np_dtype(dtype))
        shape = list(result.shape[1:])
        return tl.core.tensor(handle_cls(result, dtype.scalar), tl.block_type(dtype, shape) if shape else dtype)

    def reduce(input, axis, combine_fn, keep_dims=False, **kwargs):
        inputs = input if isinstance(input, tuple) else (input,)
        value_op, index_op = _reduce_function(tl, combine_fn)
        first = inputs[0]
        if axis is not None and not -len(first.shape) <= axis < len(first.shape):
            raise Unsupported(f"tl.reduce over axis {axis} of a {len(first.shape)}-d block")
        data = first.handle.data
        results = [to_tensor(_per_program(value_op, data, axis, keep_dims), first.dtype)]
        if index_op is not None:
            results.append(to_tensor(_per_program(index_op, data, axis, keep_dims), tl.int32))
        if isinstance(input, tuple):
            if len(input) != len(results):
                raise Unsupported("tl.reduce over a tuple with a non-standard combine function")
            return tuple(results)
        return results[0]

    return reduce


# ---- the patch scope of one grid ---------------------------------------------------------------------------
class _Patches:
    """Attributes set for one grid and restored after it (instance attributes removed, not shadowed)."""

    def __init__(self):
        self._changes: list[tuple[object, str, bool, object]] = []

    def set(self, obj, name, value):
        own = name in getattr(obj, "__dict__", {})
        self._changes.append((obj, name, own, obj.__dict__.get(name) if own else None))
        setattr(obj, name, value)

    def restore(self):
        while self._changes:
            obj, name, own, old = self._changes.pop()
            if own:
                setattr(obj, name, old)
            else:
                delattr(obj, name)


def _tensor_values(tensor) -> np.ndarray:
    """Each program's value of a tensor that holds one element per program."""
    data = tensor.handle.data
    flat = data.reshape(_lead(data), -1)
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
def _batched_language(interpreter, fn, builder):
    """triton.language patched as the interpreter patches it, then the batch-aware pieces on top."""
    import triton.language as tl

    lang_scope = interpreter._LangPatchScope()
    patches = _Patches()
    try:
        # the builder given here is the one Triton 3.6-3.8's builtins use; 3.9's use interpreter_semantic's
        for lang in (tl, tl.core):
            _patch_builtins(interpreter, lang, builder, lang_scope)
            _patch_builtins(interpreter, lang.tensor, builder, lang_scope)
            interpreter._patch_lang_tensor(lang.tensor, lang_scope)
            interpreter._patch_lang_core(lang, lang_scope)
        _patch_builtins(interpreter, tl.math, builder, lang_scope)
        if hasattr(tl.core, "tensor_descriptor_base"):
            _patch_builtins(interpreter, tl.core.tensor_descriptor_base, builder, lang_scope)
        semantic = interpreter.interpreter_semantic
        patches.set(semantic, "builder", builder)
        _patch_semantic(type(semantic), patches, interpreter, tl)
        reduce, scan = _make_reduce(interpreter, tl), _make_scan(interpreter, tl)
        for lang in (tl, tl.core):
            patches.set(lang, "reduce", reduce)
            patches.set(lang, "associative_scan", scan)
        for lang in {tl, tl.core}:
            if hasattr(lang, "range"):
                patches.set(lang, "range", _range)
            if hasattr(lang, "static_range"):
                patches.set(lang, "static_range", _range)
        patches.set(tl.tensor, "__bool__", _tensor_bool)
        patches.set(tl.tensor, "__index__", _tensor_index)
        patches.set(tl.tensor, "T", property(_tensor_transpose))
        patches.set(interpreter.InterpretedFunction, "__call__", _device_call(interpreter))
        yield
    finally:
        patches.restore()
        lang_scope.restore()


def _patch_builtins(interpreter, package, builder, scope) -> None:
    """The interpreter's _patch_builtin, also over builtins an earlier device-function call left patched
    (Triton's InterpretedFunction.__call__ patches without restoring; 3.6-3.8 bind the builder there)."""
    import triton.language as tl

    for name, member in inspect.getmembers(package):
        original = member if tl.core.is_builtin(member) else (getattr(member, "__kwdefaults__", None) or {}).get("member")
        if original is not None and tl.core.is_builtin(original):
            interpreter._patch_attr(package, name, original, builder, scope)


def _make_scan(interpreter, tl):
    """tl.associative_scan for the interpreter's own fast cases (cumsum, cumprod): numpy's accumulate along
    the block axis, which adds in order whatever the layout; other combine functions run sequentially."""
    def scan(input, axis, combine_fn, reverse=False, **kwargs):
        if isinstance(input, tuple):
            if len(input) != 1:
                raise Unsupported("tl.associative_scan over a tuple")
            return (scan(input[0], axis, combine_fn, reverse),)
        ops = {id(getattr(tl.standard, "_sum_combine", None)): np.cumsum,
               id(getattr(tl.standard, "_prod_combine", None)): np.cumprod}
        op = ops.get(id(combine_fn))
        if op is None or not isinstance(axis, int) or not -len(input.shape) <= axis < len(input.shape):
            raise Unsupported(f"tl.associative_scan with {getattr(combine_fn, '__name__', combine_fn)}")
        data_axis = axis if axis < 0 else axis + 1
        data = input.handle.data
        if reverse:
            data = np.ascontiguousarray(np.flip(data, axis=data_axis))
        result = op(data, axis=data_axis).astype(interpreter._get_np_dtype(input.dtype))
        if reverse:
            result = np.ascontiguousarray(np.flip(result, axis=data_axis))
        handle = interpreter.TensorHandle(result, input.dtype.scalar)
        return tl.core.tensor(handle, tl.block_type(input.dtype, list(result.shape[1:])))

    return scan


def _tensor_bool(self):
    if self.handle.data[0].size != 1:  # a block is truthy in the interpreter, as there
        return True
    return bool(_uniform(self.handle.data.reshape(_lead(self.handle.data)).astype(np.bool_)))


def _tensor_index(self):
    return int(_uniform(_tensor_values(self)))


def _tensor_transpose(self):
    import triton.language as tl

    if len(self.shape) != 2:
        raise Unsupported(".T of a block that is not 2-d")
    from triton.runtime.interpreter import TensorHandle

    handle = TensorHandle(np.swapaxes(self.handle.data, -1, -2), self.handle.dtype)
    return tl.core.tensor(handle, tl.core.block_type(self.dtype, [self.shape[1], self.shape[0]]))


def _device_call(interpreter):
    def __call__(self, *args, **kwargs):  # a @triton.jit helper called from a kernel: language already patched
        try:
            return self.rewrite()(*args, **kwargs)
        except (Unsupported, _Diverge):
            raise
        except Exception as exc:
            raise interpreter.InterpreterError(repr(exc)) from exc

    return __call__


def _patch_semantic(semantic_cls, patches: _Patches, interpreter, tl):
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

    def program_dtype(x):
        return tl.int1 if isinstance(x, ProgramBools) else _int_dtype_class(x.values)

    def new_to_tensor(self, x, check_type=True):
        if isinstance(x, ProgramInts):
            return program_tensor(x, program_dtype(x))
        return to_tensor(self, x, check_type)

    def new_to_tensor_type(self, x):
        if isinstance(x, ProgramInts):
            return program_dtype(x)
        return to_tensor_type(self, x)

    def new_scalar_constant(self, value, dtype):
        if isinstance(value, ProgramInts):
            return program_tensor(value, dtype)
        return scalar_constant(self, value, dtype)

    patches.set(semantic_cls, "to_tensor", new_to_tensor)
    if to_tensor_type is not None:
        patches.set(semantic_cls, "to_tensor_type", new_to_tensor_type)
    patches.set(semantic_cls, "scalar_constant", new_scalar_constant)


# ---- the grid -----------------------------------------------------------------------------------------------
def _groups(values: np.ndarray) -> list[np.ndarray]:
    """Indices of the batch split by a value, each part in program order, parts ordered by first program."""
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    return [np.flatnonzero(inverse == label) for label in np.argsort(first)]


def _run_batches(fn, args: dict, grid: tuple[int, int, int], builder, on_program) -> int:
    """Every program of the grid, in batches; returns how many batches completed."""
    batch = builder.batch
    total = grid[0] * grid[1] * grid[2]
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
    starts = np.array([st.low for st in batch.stores], dtype=np.int64)
    ends = np.array([st.high for st in batch.stores], dtype=np.int64)
    if batch.load_ranges:
        order = np.argsort(starts)
        starts_sorted, ends_running = starts[order], np.maximum.accumulate(ends[order])
        loads = np.array(batch.load_ranges, dtype=np.int64)
        index = np.searchsorted(starts_sorted, loads[:, 1], side="left") - 1
        hit = (index >= 0) & (ends_running[np.maximum(index, 0)] > loads[:, 0])
        if hit.any():
            raise Unsupported("a program loads bytes that the grid stores (programs not independent)")
    by_storage: dict[int | None, list[_Stored]] = {}
    for stored in batch.stores:  # distinct storages share no byte: each is checked on its own
        by_storage.setdefault(stored.storage, []).append(stored)
    for group in by_storage.values():
        _check_stored_once(group)


def _check_stored_once(stores: list[_Stored]) -> None:
    """Raise Unsupported when two programs stored the same byte."""
    low, high = min(st.low for st in stores), max(st.high for st in stores)
    flat = np.concatenate([_bytes_of(st.addresses(), st.width) for st in stores])
    if high - low <= 4 * flat.size + (1 << 20):
        if int(np.bincount((flat - np.uint64(low)).astype(np.int64), minlength=high - low).max()) <= 1:
            return  # no byte stored twice at all
    owner = np.concatenate([np.repeat(st.owner_of_each(), st.width) for st in stores])
    order = np.lexsort((owner, flat))
    flat, owner = flat[order], owner[order]
    if bool(((flat[1:] == flat[:-1]) & (owner[1:] != owner[:-1])).any()):
        raise Unsupported("two programs store to the same byte (their order decides it)")


def _bytes_of(addresses: np.ndarray, width: int) -> np.ndarray:
    addresses = addresses.astype(np.uint64, copy=False).reshape(-1)
    if width == 1:
        return addresses
    return (addresses[:, None] + np.arange(width, dtype=np.uint64)).reshape(-1)


def _undo(interpreter, batch: _Batch) -> None:
    handle = interpreter.TensorHandle
    store = interpreter.InterpreterBuilder.create_masked_store
    cache = (None,) * _cache_arguments(store, 4)
    for pointers, old, flags, ptr_dtype in reversed(batch.gathered):
        store(interpreter.interpreter_builder, handle(pointers, ptr_dtype), handle(old, ptr_dtype.element_ty),
              handle(flags, _mask_dtype(flags)), *cache)
    for tensor, copy in batch.snapshots.values():
        tensor.copy_(copy)
    batch.gathered.clear()
    batch.snapshots.clear()


def _mask_dtype(flags):
    import triton.language as tl

    return tl.int1 if flags.dtype == np.bool_ else tl.int32


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
        reason = None
        grid = None if callable(self.grid) else tuple(self.grid)
        if grid is not None and all(int(g) == 1 for g in grid):
            runs.append(GridRun(name, 1, 0, "a grid of one program runs as it is"))
            return original(self, *args_dev, **kwargs)
        if self.pre_run_hooks:
            reason = "the kernel has pre-run hooks"
        elif any(getattr(a, "device", None) is not None and a.device.type != "cpu"
                 for a in list(args_dev) + list(kwargs.values())):
            reason = "a tensor argument is not on the CPU"
        if reason is not None:
            _fall_back(runs, GridRun(name, 0, 0, reason))
            return original(self, *args_dev, **kwargs)
        args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
        batch = _Batch(_storages(list(args_hst) + list(kwargs_hst.values())))
        builder = _BUILDER_CLASS[0](batch)
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

            with _batched_language(interpreter, self.fn, builder):
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


_BUILDER_CLASS: list = []
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

    if not _BUILDER_CLASS:
        _BUILDER_CLASS.append(_make_builder_class(interpreter))
    executor = interpreter.GridExecutor
    original = executor.__call__
    executor.__call__ = _grid_call(interpreter, original, runs)
    _ACTIVE.append(runs)
    try:
        yield runs
    finally:
        _ACTIVE.pop()
        executor.__call__ = original
