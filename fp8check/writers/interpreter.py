"""An exact float -> FP8 conversion for Triton's CPU interpreter, proven at start-up.

The interpreter's own conversion is not exact (SPEC.md section 6: ties round away from zero, a
mantissa carry into the exponent is lost, no saturation, NaN mishandled), so a CPU run of a Triton
writer is a byte oracle only once that conversion is replaced by clamp + round-to-nearest-even.
`install()` wraps the interpreter's fp -> fp conversion for the two E4M3 destinations and leaves
every other conversion alone; `check()` then runs a known-answer kernel through the interpreter.
A Triton whose internals moved is refused, never trusted.

The one place that makes *any* Triton kernel exact on the CPU (the user's own included):
`prepare_cpu()` turns interpreter mode on before Triton is imported; `check_semantics()` proves that
came in time and that the interpreter computes what vLLM-style kernels rely on as compiled Triton does
(fixing int1 masks held as int32 on the way); `require_any_kernel(fmt)` is both checks, raised as one
line; `compiled_caveat(spec)` says why a compiled kernel could still differ; `program_listener` feeds
progress bars. Everything here is idempotent and survives fork.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os

import numpy as np
import torch

from .. import fp8
from ..errors import ProducerError, first_line
from ..spec import FP8Format

# Interpreter internals this patch relies on were read in these releases (the patch target and its
# signature are also checked at run time).
TESTED_TRITON = ("3.4", "3.5", "3.6", "3.7", "3.8", "3.9")

_STATE: dict[str, object] = {"installed": False}


class ExactConversionError(ProducerError):
    """The interpreter's FP8 conversion could not be made exact: no CPU Triton run may be trusted."""


def _triton_version() -> str:
    import triton

    return triton.__version__


def install() -> None:
    """Replace the interpreter's float -> e4m3 conversion by fp8check's exact encoder. Idempotent."""
    if _STATE["installed"]:
        return
    version = _triton_version()
    if not version.startswith(TESTED_TRITON):
        raise ExactConversionError(
            f"Triton {version}: the interpreter's FP8 conversion is patched only for Triton "
            f"{', '.join(TESTED_TRITON)}; its internals may have moved"
        )
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError as exc:
        raise ExactConversionError(f"Triton {version}: interpreter not importable ({exc})") from None
    builder = getattr(interpreter, "InterpreterBuilder", None)
    original = getattr(builder, "create_fp_to_fp", None)
    handle_cls = getattr(interpreter, "TensorHandle", None)
    if original is None or handle_cls is None:
        raise ExactConversionError(f"Triton {version}: InterpreterBuilder.create_fp_to_fp not found")

    targets = {tl.float8e4nv: FP8Format.E4M3FN, tl.float8e4b8: FP8Format.E4M3FNUZ}
    sources = {tl.float32: np.float32, tl.float16: np.float16, tl.float64: np.float64}

    @functools.wraps(original)
    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        fmt = targets.get(dst_type.scalar)
        src_type = src.dtype.scalar
        if fmt is None or (src_type not in sources and src_type != tl.bfloat16):
            return original(self, src, dst_type, rounding_mode)
        if src_type == tl.bfloat16:  # bf16 is held as uint16 bits: widen exactly to fp32
            values = (src.data.astype(np.uint32) << 16).view(np.float32)
        else:
            values = src.data.astype(np.float32) if src_type != tl.float64 else src.data
        encoded = fp8.encode(torch.from_numpy(np.ascontiguousarray(values)), fmt).numpy()
        return handle_cls(encoded.reshape(src.data.shape), dst_type.scalar)

    builder.create_fp_to_fp = create_fp_to_fp
    _STATE["installed"] = True


# Known answers, written out by hand from the format definitions (SPEC.md section 4), not from encode():
# (fp32 input, e4m3fn byte, e4m3fnuz byte).
KNOWN_ANSWERS: tuple[tuple[float, int, int], ...] = (
    (0.0, 0x00, 0x00),
    (-0.0, 0x80, 0x00),  # fnuz has no -0
    (1.0, 0x38, 0x40),
    (1.0625, 0x38, 0x40),  # tie between 1.0 and 1.125: to even (1.0)
    (1.1875, 0x3A, 0x42),  # tie between 1.125 and 1.25: to even (1.25)
    (-1.1875, 0xBA, 0xC2),
    (15.5, 0x58, 0x60),  # tie 15 / 16: the even neighbour is 16, a carry into the exponent
    (126.24, 0x70, 0x78),  # rounds up to 128: the carry the stock interpreter loses
    (2.0**-9, 0x01, 0x02),  # smallest e4m3fn subnormal; 2 subnormal steps in fnuz
    (2.0**-10, 0x00, 0x01),  # fn: tie between 0 and 2^-9, to even (0); fnuz: its smallest subnormal
    (3 * 2.0**-10, 0x02, 0x03),  # fn: tie 2^-9 / 2^-8, to even (2^-8)
    (240.0, 0x77, 0x7F),
    (448.0, 0x7E, 0x7F),  # fnuz saturates at 240
    (-448.0, 0xFE, 0xFF),
    (464.0, 0x7E, 0x7F),  # beyond max: saturate, never NaN
    (1.0e9, 0x7E, 0x7F),
    (-math.inf, 0xFE, 0xFF),
    (math.nan, 0x7F, 0x80),
)


def _run_known_answers(fmt: FP8Format) -> list[int]:
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    def convert(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(src_ptr + offs, mask=mask, other=0.0)
        tl.store(dst_ptr + offs, x.to(dst_ptr.dtype.element_ty), mask=mask)

    src = torch.tensor([v for v, _, _ in KNOWN_ANSWERS], dtype=torch.float32)
    dst = torch.zeros(len(KNOWN_ANSWERS), dtype=torch.uint8)
    InterpretedFunction(convert)[(1,)](src, dst.view(fmt.torch_dtype()), src.numel(), BLOCK=32)
    return dst.tolist()


@functools.lru_cache(maxsize=None)
def check(fmt: FP8Format = FP8Format.E4M3FN) -> tuple[bool, str]:
    """(ok, one-line reason): install the exact conversion and prove it on the known answers for fmt.

    Formats are checked separately: Triton 3.6's interpreter cannot convert to fnuz (fp8e4b8) at all,
    which must not stop e4m3fn runs there.
    """
    column = 0 if fmt is FP8Format.E4M3FN else 1
    try:
        install()
        got = _run_known_answers(fmt)
    except ExactConversionError as exc:
        return False, str(exc)
    except Exception as exc:  # the interpreter itself broke: not trustworthy either
        return False, f"Triton {_triton_version()} interpreter cannot run the {fmt.value} known-answer kernel ({type(exc).__name__}: {exc})"
    for (value, *expected), byte in zip(KNOWN_ANSWERS, got):
        if byte != expected[column]:
            return False, (
                f"Triton {_triton_version()} interpreter converts {value!r} to {fmt.value} byte 0x{byte:02x},"
                f" expected 0x{expected[column]:02x}: its FP8 conversion is not exact"
            )
    return True, (
        f"exact {fmt.value} conversion installed in Triton {_triton_version()}'s interpreter"
        f" ({len(KNOWN_ANSWERS)} known answers pass)"
    )


def require(fmt: FP8Format) -> None:
    ok, reason = check(fmt)
    if not ok:
        raise ExactConversionError(f"refusing to run a Triton writer on the CPU: {reason}")


# ---- interpreter mode for every Triton kernel of a CPU run ----------------------------------------------
# Triton decides at decoration time whether `@triton.jit` makes a compiled or an interpreted kernel, and
# its own `@jit` helpers (tl.max, tl.sum, ...) are decorated when Triton is first imported: interpreter
# mode must be on before that import (SPEC.md section 6), or a kernel on a machine without a GPU fails
# with "0 active drivers" and a helper call with "Cannot call @triton.jit'd outside of the scope of a kernel".
INTERPRET_ENV = "TRITON_INTERPRET"


def prepare_cpu() -> None:
    """Switch interpreter mode on for this process (and the children it forks). Idempotent, cheap:
    nothing is imported here. Call it once the run is known to be on the CPU and before any writer
    module imports Triton; `interpret_mode()` says whether it came in time."""
    os.environ[INTERPRET_ENV] = "1"  # set even when too late: kernels decorated from now on are interpreted


def interpret_mode() -> tuple[bool, str]:
    """(ok, one-line reason): whether @triton.jit kernels and Triton's own @jit helpers run in the interpreter."""
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    if os.environ.get(INTERPRET_ENV, "0") in ("", "0", "false", "False"):
        return False, f"{INTERPRET_ENV} is not set: @triton.jit kernels would be compiled, and there is no GPU"
    if not isinstance(getattr(tl, "max", None), InterpretedFunction):
        return False, (
            f"Triton {triton.__version__} was imported before {INTERPRET_ENV}=1 was set, so its own helpers"
            " (tl.max, ...) are compiled-only; set it before Triton is imported"
        )
    return True, f"{INTERPRET_ENV}=1 was set before Triton {triton.__version__} was imported"


# Compiled Triton semantics a vLLM-style kernel relies on, written out by hand (C-style integer division
# and remainder truncate toward zero; masked loads give `other`; a program that returns early stores
# nothing), checked under the interpreter with one small kernel.
SEMANTICS_INTS = (-33, -17, -16, -1, 0, 1, 15, 16)
SEMANTICS_EXPECTED_DIV = (-2, -1, -1, 0, 0, 0, 0, 1)  # x // 16, truncated toward zero
SEMANTICS_EXPECTED_MOD = (-1, -1, 0, -1, 0, 1, 15, 0)  # x % 16, the sign of x
SEMANTICS_FLOATS = (1.5, -3.0, 0.375, 7.0, 2.0, 0.125, 9.0, 10.0)  # last two masked out -> -7.0
SEMANTICS_EXPECTED_FLOATS = (
    1.5, -3.0, 0.375, 7.0, 2.0, 0.125, -7.0, -7.0,  # the masked load
    7.0, 7.0,  # tl.max(axis=-1), tl.reduce with the max combiner
    2.0, 4.0, 0.5, 8.0, 2.0, 0.125, 8.0, 8.0,  # exp2(ceil(log2(|x|))); |x| a power of two stays itself
)


def _run_semantics_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def semantics(int_ptr, float_ptr, out_int_ptr, out_float_ptr, N: tl.constexpr):
        if tl.program_id(0) == 1:  # early return: program 1 must store nothing
            return
        offs = tl.arange(0, N)
        a = tl.load(int_ptr + offs)
        tl.store(out_int_ptr + offs, a // 16)
        tl.store(out_int_ptr + N + offs, a % 16)
        in_table = tl.program_id(0) < N  # a scalar int1: `block & scalar` masks must load and store
        x = tl.load(float_ptr + offs, mask=(offs < N - 2) & in_table, other=-7.0)
        tl.store(out_float_ptr + offs, x, mask=(offs >= 0) & in_table)
        tl.store(out_float_ptr + N, tl.max(x, axis=-1))
        tl.store(out_float_ptr + N + 1, tl.reduce(x, 0, tl.standard._elementwise_max))
        tl.store(out_float_ptr + N + 2 + offs, tl.exp2(tl.ceil(tl.log2(tl.abs(x)))))

    ints = torch.tensor(SEMANTICS_INTS, dtype=torch.int64)
    floats = torch.tensor(SEMANTICS_FLOATS, dtype=torch.float32)
    out_int = torch.full((2 * len(ints),), 99, dtype=torch.int64)
    out_float = torch.zeros(len(SEMANTICS_EXPECTED_FLOATS), dtype=torch.float32)
    semantics[(2,)](ints, floats, out_int, out_float, N=len(ints))
    return out_int.tolist(), out_float.tolist()


def install_mask_fix() -> None:
    """Masks that are int1 to Triton but int32 in numpy (a block int1 `&` a scalar int1, e.g. vLLM's
    `(pos < seq_len) & (logical_blk < max_blocks)`) make the stock interpreter's masked load and store
    fail ("mask has unsupported dtype"); compiled Triton takes them. Give those calls the int1 values
    (the low bit) as numpy bools. Idempotent; proven by the semantics kernel."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_masked_load, "_fp8check_mask_fix", False):
        return
    load, store, handle_cls = builder.create_masked_load, builder.create_masked_store, interpreter.TensorHandle

    def as_bool(mask):
        if mask.data.dtype == np.bool_:
            return mask
        return handle_cls((mask.data & 1).astype(np.bool_), mask.dtype.scalar)

    # the cache arguments after `other` / `mask` differ between releases (3.6-3.8: cache_modifier,
    # eviction_policy; 3.9: cache_policy): passed through as they come
    @functools.wraps(load)
    def create_masked_load(self, ptrs, mask, *rest):
        return load(self, ptrs, as_bool(mask), *rest)

    @functools.wraps(store)
    def create_masked_store(self, ptrs, value, mask, *rest):
        return store(self, ptrs, value, as_bool(mask), *rest)

    create_masked_load._fp8check_mask_fix = True
    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store


@functools.lru_cache(maxsize=None)
def check_semantics() -> tuple[bool, str]:
    """(ok, one-line reason): interpreter mode is on in time and the interpreter computes tl.max,
    tl.reduce, exp2/log2/ceil, masks, early returns and integer // and % on negatives as compiled Triton."""
    try:
        ok, reason = interpret_mode()
        if not ok:
            return False, reason
        install_mask_fix()
        ints, floats = _run_semantics_kernel()
    except Exception as exc:  # the interpreter itself broke: not trustworthy
        return False, f"Triton {_triton_version()} interpreter cannot run the semantics kernel ({first_line(exc)})"
    expected_ints = list(SEMANTICS_EXPECTED_DIV + SEMANTICS_EXPECTED_MOD)
    if ints != expected_ints:
        return False, (f"Triton {_triton_version()} interpreter computes x // 16, x % 16 for x in {SEMANTICS_INTS}"
                       f" as {ints}, compiled Triton as {expected_ints} (C-style, toward zero)")
    if floats != list(SEMANTICS_EXPECTED_FLOATS):
        return False, (f"Triton {_triton_version()} interpreter's masked load / tl.max / tl.reduce / exp2(ceil(log2))"
                       f" gave {floats}, expected {list(SEMANTICS_EXPECTED_FLOATS)}")
    return True, ("interpreter mode on before import; tl.max, tl.reduce, exp2/log2/ceil, masks (int1 masks fixed),"
                  " early return, // and % agree with compiled Triton")


def require_any_kernel(fmt: FP8Format) -> None:
    """Before a kernel the user wrote runs on the CPU: interpreter mode in time, compiled semantics, exact FP8."""
    for ok, reason in (check_semantics(), check(fmt)):
        if not ok:
            raise ExactConversionError(f"refusing to run a Triton kernel on the CPU: {reason}")


def compiled_caveat(spec) -> str | None:
    """Why a compiled kernel could write other bytes than this interpreter run, where fp8check knows a reason.

    Compiled Triton on NVIDIA lowers fp32 `/` to an approximate division (SPEC.md section 3, docs/GPU.md);
    the interpreter divides exactly. With fp32 scales every `x / s` is exposed; with ue8m0 `s` is a power
    of two, so only `amax / DIV` near DIV * 2^k can move the ceil (the ue8m0-boundary inputs).
    """
    from ..spec import ScaleFormat

    if spec.scale_fmt is ScaleFormat.UE8M0:
        return None
    return ("CPU interpreter run: a kernel compiled for NVIDIA that uses fp32 `/` (approximate there, SPEC.md"
            " section 3) can differ from these bytes by one FP8 code on some values and in a scale's last bit;"
            " tl.math.div_rn is exact on both")


# ---- a kernel run on CPU tensors: the whole grid at once -------------------------------------------------
def kernel_run(device: torch.device):
    """The context in which fp8check calls a kernel (writer or reader) on `device`: on the CPU, interpreted
    Triton grids run all their programs at once (grid_interpreter.py, same bytes as one by one; a grid it
    cannot run so runs sequentially, its GridRun record says why); elsewhere nothing. Yields the records."""
    if device.type != "cpu":
        return contextlib.nullcontext([])
    from .grid_interpreter import grid_at_once

    return grid_at_once()


# ---- progress: one call per program ----------------------------------------------------------------------
_LISTENER: dict[str, object] = {"fn": None, "installed": False}


def _install_progress_hook() -> None:
    """Wrap the interpreter's grid bookkeeping so a listener hears (done, total) once per program."""
    if _LISTENER["installed"]:
        return
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    set_dim, set_idx = builder.set_grid_dim, builder.set_grid_idx

    def set_grid_dim(self, nx, ny, nz):
        self._fp8check_total, self._fp8check_done = nx * ny * nz, 0
        return set_dim(self, nx, ny, nz)

    def set_grid_idx(self, x, y, z):
        listener = _LISTENER["fn"]
        if listener is not None:
            self._fp8check_done = getattr(self, "_fp8check_done", 0) + 1
            listener(self._fp8check_done, getattr(self, "_fp8check_total", 0))
        return set_idx(self, x, y, z)

    builder.set_grid_dim, builder.set_grid_idx = set_grid_dim, set_grid_idx
    _LISTENER["installed"] = True


@contextlib.contextmanager
def program_listener(fn):
    """Within the block, `fn(done, total)` is called as each interpreted program starts (for progress bars)."""
    _install_progress_hook()
    previous, _LISTENER["fn"] = _LISTENER["fn"], fn
    try:
        yield
    finally:
        _LISTENER["fn"] = previous
