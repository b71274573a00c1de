"""Known-answer checks of the exact interpreter (interpreter.py): before Triton kernels run on the CPU, the
FP8 conversion and the semantics writers rely on are run on inputs whose bytes are known."""

from __future__ import annotations

import functools
import math

import torch

from ..core import fp8
from ..core.errors import NotRunnableHere, first_line
from ..core.spec import FP8Format
from .interpreter import ExactConversionError, _triton_version, cpu_kernels

# Known answers, written out by hand from the format definitions (docs/NUMERICS.md), not from encode():
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


def _run_known_answers(fmt: FP8Format) -> tuple[list[int], torch.Tensor]:
    import triton
    import triton.language as tl

    @triton.jit
    def convert(src_ptr, dst_ptr, back_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(src_ptr + offs, mask=mask, other=0.0)
        tl.store(dst_ptr + offs, x.to(dst_ptr.dtype.element_ty), mask=mask)
        tl.store(back_ptr + offs, tl.load(dst_ptr + offs, mask=mask).to(tl.float32), mask=mask)

    src = torch.tensor([v for v, _, _ in KNOWN_ANSWERS], dtype=torch.float32)
    dst = torch.zeros(len(KNOWN_ANSWERS), dtype=torch.uint8)
    back = torch.zeros(len(KNOWN_ANSWERS), dtype=torch.float32)
    with cpu_kernels():
        convert[(1,)](src, dst.view(fmt.torch_dtype()), back, src.numel(), BLOCK=32)
    return dst.tolist(), back


@functools.lru_cache(maxsize=None)
def check(fmt: FP8Format = FP8Format.E4M3FN) -> tuple[bool, str]:
    """(ok, one-line reason): the exact conversion of cpu_kernels(), proven on the known answers for fmt
    (both ways: fp32 -> fmt, and the bytes read back)."""
    column = 0 if fmt is FP8Format.E4M3FN else 1
    try:
        got, back = _run_known_answers(fmt)
    except ExactConversionError as exc:
        return False, str(exc)
    except Exception as exc:  # the interpreter itself broke: not trustworthy either
        return False, (f"Triton {_triton_version()} interpreter cannot run the {fmt.value} known-answer"
                       f" kernel ({type(exc).__name__}: {exc})")
    for (value, *expected), byte in zip(KNOWN_ANSWERS, got):
        if byte != expected[column]:
            return False, (f"Triton {_triton_version()} interpreter converts {value!r} to {fmt.value} byte"
                           f" 0x{byte:02x}, expected 0x{expected[column]:02x}: its FP8 conversion is not"
                           " exact")
    decoded = fp8.decode(torch.tensor(got, dtype=torch.uint8), fmt)
    if not ((back == decoded) | (back.isnan() & decoded.isnan())).all():
        return False, (f"Triton {_triton_version()} interpreter reads {fmt.value} bytes back as other values:"
                       " its FP8 conversion is not exact")
    return True, (f"exact {fmt.value} conversion in Triton {_triton_version()}'s interpreter"
                  f" ({len(KNOWN_ANSWERS)} known answers pass)")


class FormatNotHere(ExactConversionError, NotRunnableHere):
    """e4m3fn converts exactly here but this Triton's interpreter cannot run e4m3fnuz: skipped in a gate."""


def require(fmt: FP8Format) -> None:
    ok, reason = check(fmt)
    if not ok:
        other_ok = fmt is not FP8Format.E4M3FN and check(FP8Format.E4M3FN)[0]
        raise (FormatNotHere if other_ok else ExactConversionError)(
            f"refusing to run a Triton writer on the CPU: {reason}")


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


@functools.lru_cache(maxsize=None)
def check_semantics() -> tuple[bool, str]:
    """(ok, one-line reason): a @triton.jit kernel on CPU tensors runs in the interpreter, which computes
    tl.max (a @jit helper), tl.reduce, exp2/log2/ceil, masks, early returns and integer // and % on
    negatives as compiled Triton does."""
    try:
        with cpu_kernels():
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
    return True, ("kernels on CPU tensors run interpreted; tl.max, tl.reduce, exp2/log2/ceil, masks (int1 masks"
                  " fixed), early return, // and % agree with compiled Triton")


def require_any_kernel(fmt: FP8Format) -> None:
    """Before a kernel the user wrote runs on the CPU: compiled semantics, exact FP8."""
    ok, reason = check_semantics()
    if not ok:
        raise ExactConversionError(f"refusing to run a Triton kernel on the CPU: {reason}")
    require(fmt)


def compiled_caveat(spec) -> str | None:
    """Why a compiled kernel could write other bytes than this interpreter run, where fp8check knows a reason:
    compiled Triton on NVIDIA lowers fp32 `/` to an approximate division (docs/NUMERICS.md, docs/GPU.md),
    the interpreter divides exactly. With fp32 scales every `x / s` is exposed; with ue8m0 `s` is a power
    of two, so only `amax / DIV` near DIV * 2^k can move the ceil (the ue8m0-boundary inputs)."""
    if spec.scale_fmt.power_of_two:
        return None
    return ("CPU interpreter run: a kernel compiled for NVIDIA that uses fp32 `/` (approximate there, docs/NUMERICS.md"
            " section 3) can differ from these bytes by one FP8 code on some values and in a scale's last bit;"
            " tl.math.div_rn is exact on both")
