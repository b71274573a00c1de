"""Per-program values of a batched grid (grid.py): Python ints that differ between the programs of a
batch (ProgramInts, ProgramBools), and the exceptions that end a batched run."""

from __future__ import annotations

import numbers

import numpy as np


class Unsupported(Exception):
    """The grid cannot run at once; it runs sequentially. The message says why (one line)."""


class _Diverge(Exception):
    """The programs of a batch disagree on a value Python needs concretely: split them by it."""

    def __init__(self, values: np.ndarray):
        super().__init__("diverge")
        self.values = values

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


def _int_dtype_class(values: np.ndarray):
    """The dtype Triton's to_tensor_type gives each program's int: one for all, or diverge."""
    import triton.language as tl

    classes = np.select([(values >= -2**31) & (values < 2**31), (values >= 2**31) & (values < 2**32)], [0, 1], 2)
    return (tl.int32, tl.uint32, tl.int64)[int(_uniform(classes))]
