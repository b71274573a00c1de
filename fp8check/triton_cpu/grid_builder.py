"""The batched builder of a grid run (grid.py): the Triton interpreter's builder operations on arrays with
a leading program axis; loads and stores gather and scatter through the real memory with their masks."""

from __future__ import annotations

import dataclasses
import functools
import inspect

import numpy as np

from .grid_language import Unsupported


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


def _bool_mask(data: np.ndarray) -> np.ndarray:
    return data if data.dtype == np.bool_ else (data & 1).astype(np.bool_)


def _same_lead(*arrays: np.ndarray) -> list[np.ndarray]:
    lead = max(len(a) for a in arrays)
    return [np.broadcast_to(a, (lead,) + a.shape[1:]) for a in arrays]


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

    def _holding(self, low: int, high: int):
        return next(((start, end, t) for start, end, t in self.storages if start <= low < high <= end), None)

    def gather(self, pointers: np.ndarray, taken: np.ndarray, low: int, high: int, dtype, element):
        """The loaded elements (masked lanes arbitrary) by numpy indexing into the argument storage that
        holds bytes [low, high), the same bytes the interpreter's element-wise load copies; None when no
        argument storage holds them or an element is misaligned there."""
        width, found = np.dtype(dtype).itemsize, self._holding(low, high)
        if found is None or dtype == np.bool_ or width * 8 != max(8, element.primitive_bitwidth):
            return None
        start, end, tensor = found
        offsets = pointers - np.uint64(start)
        if bool((offsets % np.uint64(width))[taken].any()):
            return None
        whole = tensor.numpy()[: (end - start) // width * width].view(dtype)
        return whole[np.where(taken, offsets // np.uint64(width), np.uint64(0)).astype(np.intp)]

    def keep_for_undo(self, low: int, high: int) -> int | None:
        """Copy the argument storage holding bytes [low, high) once, before the grid's first store to it;
        its first byte, or None when no argument storage holds them."""
        found = self._holding(low, high)
        if found is not None and found[0] not in self.snapshots:
            self.snapshots[found[0]] = (found[2], found[2].clone())
        return None if found is None else found[0]


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


@functools.lru_cache(maxsize=None)
def _make_builder_class(interpreter):
    """InterpreterBuilder with a leading program axis on every value."""
    import triton.language as tl
    base, handle_cls = interpreter.InterpreterBuilder, interpreter.TensorHandle
    np_dtype = interpreter._get_np_dtype
    load_cache = (None,) * _cache_arguments(base.create_masked_load, 5)

    def unsupported(name):
        def method(self, *args, **kwargs):
            raise Unsupported(f"tl operation {name.removeprefix('create_')} is not run grid-at-once")

        return method

    def shaped(fn):  # the data of `arg` reshaped by fn(data, *args), its dtype kept
        return lambda self, arg, *args: handle_cls(fn(arg.data, *args), arg.dtype.scalar)

    @functools.lru_cache(maxsize=None)
    def fp16_table(dtype) -> np.ndarray:  # the interpreter's fp8 -> fp16 conversion of all 256 codes
        codes = np.arange(256, dtype=np.uint8).view(np_dtype(dtype))
        return interpreter._convert_float(codes, dtype, tl.float16, None).view(np.float16)

    def to_fp16(handle) -> np.ndarray:  # _convert_float to fp16, as the interpreter's create_dot calls it
        dtype = handle.dtype.scalar
        if dtype.primitive_bitwidth != 8 or not dtype.is_floating():
            return interpreter._convert_float(handle.data, dtype, tl.float16, None).view(np.float16)
        return np.ascontiguousarray(fp16_table(dtype)[np.ascontiguousarray(handle.data).view(np.uint8)])

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
            coords = [values.astype(np.int32) for values in coords]  # a value all programs share: one row
            self.program_vectors = tuple(v[:1] if bool((v == v[0]).all()) else v for v in coords)

        def create_get_program_id(self, axis):
            return handle_cls(self.program_vectors[axis], tl.int32)

        # memory: the interpreter's own gather and scatter, with every program's pointers at once
        def create_masked_load(self, ptrs, mask, other, *cache_and_volatile):
            arrays = [ptrs.data, mask.data] + ([] if other is None else [other.data])
            arrays = [np.ascontiguousarray(a) for a in np.broadcast_arrays(*arrays)]
            taken = _bool_mask(arrays[1])
            element, gathered = ptrs.get_element_ty(), None
            if taken.any():
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
            return handle_cls(np.matmul(to_fp16(a), to_fp16(b), dtype=d.data.dtype) + d.data, d.dtype.scalar)

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
            owners = self.batch.program_ids  # one virtual owner for a store all programs share
            if len(pointers) == 1 and len(owners) > 1:
                owners = np.array([-1 - self.batch.batch_number], dtype=np.int64)
            self.batch.attempt_stores.append(_Stored(pointers, taken, owners, width, low, high, storage))
            return base.create_masked_store(self, pointer_handle, handle_cls(values, value.dtype), mask_handle, *cache)

        # shapes: the leading program axis stays first
        create_reshape = shaped(lambda data, shape, allow_reorder=False: data.reshape((len(data), *shape)))
        create_trans = shaped(lambda data, perm: np.transpose(data, (0, *(p + 1 for p in perm))))
        create_expand_dims = shaped(lambda data, axis: np.expand_dims(data, axis + 1 if axis >= 0 else axis))
        create_broadcast = shaped(lambda data, shape: np.broadcast_to(data, (len(data), *shape)))
        create_cat = shaped(lambda data, rhs: np.concatenate(_same_lead(data, rhs.data), axis=1))
        create_join = shaped(lambda data, rhs: np.stack(_same_lead(data, rhs.data), axis=-1))
        create_gather = shaped(lambda data, indices, axis: np.take_along_axis(*_same_lead(data, indices.data),
                                                                               axis=axis + 1))

        def create_splat(self, ret_ty, arg):
            shape = tuple(ret_ty.shape)
            first = arg.data.reshape(len(arg.data), -1)[:, 0].astype(np_dtype(arg.dtype), copy=False)
            full = np.broadcast_to(first.reshape((-1,) + (1,) * len(shape)), (first.shape[0],) + shape)
            return handle_cls(np.ascontiguousarray(full), arg.dtype.scalar)

        def create_unsplat(self, arg):
            first = arg.data.reshape(len(arg.data), -1)[:, 0]
            return handle_cls(first.astype(np_dtype(arg.dtype)), arg.dtype.scalar)

        def create_make_range(self, *args):  # the last two: start, stop
            return handle_cls(np.arange(*args[-2:], dtype=np.int32)[None], tl.int32)

        def create_assert(self, condition, message):
            if not bool(np.asarray(condition.data).all()):
                raise Unsupported("a device assertion fails")

    overridden = set(vars(BatchBuilder))
    for name in dir(base):
        if name.startswith(("create_", "get_")) and name not in overridden and name not in ELEMENTWISE \
                and not name.endswith("_ty") and not name.startswith(("get_int", "get_uint", "get_fp", "get_bf16")):
            setattr(BatchBuilder, name, unsupported(name))
    return BatchBuilder
