"""NaN, inf, out-of-range values and bf16 rounding as compiled Triton computes them, in fp8check's CPU interpreter.

Triton's interpreter evaluates float min/max/clamp, float -> integer and fp32 -> bf16 casts with numpy, which
differs from compiled code where NaN, inf or an out-of-range value reaches them, and in the rounding of bf16.
Each rule, its source and the compiled bytes it was checked on (an H200, tests/corpus/nan-probe-nvidia.json) are
in docs/NUMERICS.md, "NaN, inf and out-of-range values".
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

CANONICAL_NAN = np.array(0x7FFFFFFF, dtype=np.uint32).view(np.float32)  # what NVIDIA float arithmetic returns
BF16_CANONICAL_NAN = np.uint16(0x7FFF)


class RuntimeFloat(float):
    """A float kernel argument: a runtime value to the compiler (never a constant bound of tl.clamp), and
    so is what Python arithmetic makes of it (`0 - hi`)."""


def _keeping_runtime(op):
    def method(self, *others):
        out = op(float(self), *others)
        return RuntimeFloat(out) if isinstance(out, float) else out

    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__neg__", "__pos__", "__abs__"):
    setattr(RuntimeFloat, _name, _keeping_runtime(getattr(float, _name)))


def runtime_arguments(fn, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`args`, `kwargs` with every float that binds to a parameter not declared `tl.constexpr` marked: a
    runtime value to the compiler, however the interpreter passes it."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    runtime = {p.name for p in parameters if "constexpr" not in str(p.annotation)}

    def mark(name, value):
        return RuntimeFloat(value) if type(value) is float and name in runtime else value

    args = tuple(mark(p.name, a) for p, a in zip(parameters, args)) + args[len(parameters):]
    return args, {name: mark(name, value) for name, value in kwargs.items()}


class _Constant:
    """Marks a handle the interpreter made for a constant (`get_fp32(448.0)`)."""


def _propagates(propagate_nan) -> bool:
    return not str(propagate_nan).endswith("NONE")  # tl.PropagateNan (Triton's ir.PROPAGATE_NAN): NONE, ALL


def _floats(builder, amd):
    """min/max/clamp per propagate_nan, and NVIDIA's one NaN out of float arithmetic."""
    def nvidia_nan(method):
        @functools.wraps(method)
        def wrapped(self, *args):
            out = method(self, *args)
            if not amd() and out.data.dtype == np.float32 and np.isnan(out.data).any():
                out.data = np.where(np.isnan(out.data), CANONICAL_NAN, out.data)
            return out

        return wrapped

    def create_clampf(self, arg, lo, hi, propagate_nans):
        low, high = (np.maximum, np.minimum) if _propagates(propagate_nans) else (np.fmax, np.fmin)
        return builder.binary_op(self, builder.binary_op(self, arg, lo, low), hi, high)

    ops = {"create_minnumf": np.fmin, "create_maxnumf": np.fmax, "create_minimumf": np.minimum,
           "create_maximumf": np.maximum}
    found = {name: lambda self, lhs, rhs, op=op: builder.binary_op(self, lhs, rhs, op)
             for name, op in ops.items()}
    found["create_clampf"] = create_clampf
    names = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_precise_divf")
    found.update((name, getattr(builder, name)) for name in names if hasattr(builder, name))
    return [(builder, name, nvidia_nan(method)) for name, method in found.items()]


def _wrapping(owner, names, replacement) -> list[tuple[object, str, object]]:
    """(owner, name, method) for each of `names` the owner has: `replacement(original, self, ...)`."""
    def method(original):
        return functools.wraps(original)(lambda self, *args, **kw: replacement(original, self, *args, **kw))

    return [(owner, name, method(getattr(owner, name))) for name in names if hasattr(owner, name)]


def _constants(builder, handle_cls):
    constant_cls = type("ConstantTensorHandle", (handle_cls, _Constant), {})

    def marked(original, self, value):
        out = original(self, value)
        if type(out) is handle_cls and not isinstance(value, RuntimeFloat):
            return constant_cls(out.data, out.dtype)
        return out

    return _wrapping(builder, ("get_fp16", "get_fp32", "get_fp64"), marked)


def _clip_lowering(semantic_cls, handle_cls, amd):
    """`tl.clamp(x, -L, L)` with constant bounds as NVIDIA sm_90+ compiles it (min.xorsign.abs). Installed
    on Triton's semantic class (Triton 3.6 makes a semantic object per builtin; 3.4 has module functions),
    it acts on interpreter values only: a compiled kernel's clamp is the compiler's."""
    original = semantic_cls.clamp

    def constant_value(bound):
        bound = getattr(bound, "value", bound)  # a constexpr
        if isinstance(bound, RuntimeFloat):
            return None
        if isinstance(bound, (int, float)):  # Triton 3.9 passes Python numbers through to the semantic layer
            return float(bound)
        handle = getattr(bound, "handle", None)
        if isinstance(handle, _Constant) and handle.data.size == 1:
            return float(handle.data.reshape(-1)[0])
        return None

    first = 1 if isinstance(semantic_cls, type) else 0  # a method's self; Triton 3.4's functions take none

    @functools.wraps(original)
    def clamp(*args, **kwargs):
        out = original(*args, **kwargs)
        x, min, max, propagate_nan = args[first:first + 4]
        handle = getattr(x, "handle", None)
        if not isinstance(handle, handle_cls) or amd() or _propagates(propagate_nan):
            return out
        lo, hi = constant_value(min), constant_value(max)
        if lo is None or hi is None or lo != -hi:
            return out
        data = handle.data
        if data.dtype.kind == "f" and np.isnan(data).any():
            out.handle.data = np.where(np.isnan(data), np.copysign(np.asarray(hi, data.dtype), data), out.handle.data)
        return out

    return [(semantic_cls, "clamp", clamp)]


def _float_to_int(builder, handle_cls, interpreter, amd):
    def convert(original, self, src, dst_type):
        target = np.dtype(interpreter._get_np_dtype(dst_type))
        data = src.data
        if data.dtype.kind != "f" or target.kind not in "iu":
            return original(self, src, dst_type)
        if amd():  # AMDGPU converts to a signed 32-bit integer below 32 bits (so -1.5 -> 0xFF)
            wide = target if target.itemsize >= 4 else np.dtype(np.int32)
        else:  # PTX cvt.rzi converts to 16 bits at least, saturating in the target's signedness
            wide = target if target.itemsize >= 2 else np.dtype(f"{target.kind}2")
        info = np.iinfo(wide)
        values = np.trunc(np.nan_to_num(data.astype(np.float64), nan=0.0, posinf=float(info.max),
                                        neginf=float(info.min)))
        converted = np.zeros(values.shape, dtype=wide)
        inside = (values > float(info.min)) & (values < float(info.max))
        converted[inside] = values[inside].astype(wide)
        converted[values >= float(info.max)] = info.max
        converted[values <= float(info.min)] = info.min
        return handle_cls(converted.astype(target), dst_type.scalar)

    return _wrapping(builder, ("create_fp_to_si", "create_fp_to_ui"), convert)


def _bf16_rounding(builder, handle_cls, amd):
    import triton.language as tl

    def create_fp_trunc(original, self, src, dst_type):
        if src.dtype.scalar != tl.float32 or dst_type.scalar != tl.bfloat16:
            return original(self, src, dst_type)
        bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32)
        rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        nan = BF16_CANONICAL_NAN if not amd() else ((bits >> 16) | 0x40).astype(np.uint16)
        return handle_cls(np.where(np.isnan(src.data), nan, rounded).astype(np.uint16), dst_type.scalar)

    return _wrapping(builder, ("create_fp_trunc",), create_fp_trunc)


def patches(interpreter, amd) -> list[tuple[object, str, object]]:
    """(owner, attribute, value) that cpu_kernels() installs for one CPU kernel run and takes back after it;
    `amd()`: the launch stands for an AMD GPU (an e4m3fnuz launch)."""
    from triton.language import semantic

    builder, handle_cls = interpreter.InterpreterBuilder, interpreter.TensorHandle
    owner = getattr(semantic, "TritonSemantic", semantic)  # Triton 3.4: module functions (x, min, max, nan, builder)
    return (_floats(builder, amd) + _constants(builder, handle_cls) + _clip_lowering(owner, handle_cls, amd)
            + _float_to_int(builder, handle_cls, interpreter, amd) + _bf16_rounding(builder, handle_cls, amd))
