"""An exact float -> FP8 conversion for Triton's CPU interpreter, proven at start-up.

The interpreter's own conversion is not exact (SPEC.md section 6: ties round away from zero, a
mantissa carry into the exponent is lost, no saturation, NaN mishandled), so a CPU run of a Triton
writer is a byte oracle only once that conversion is replaced by clamp + round-to-nearest-even.
`install()` wraps the interpreter's fp -> fp conversion for the two E4M3 destinations and leaves
every other conversion alone; `check()` then runs a known-answer kernel through the interpreter.
A Triton whose internals moved is refused, never trusted.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from .. import fp8
from ..errors import ProducerError
from . import interpreter_speed
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
    interpreter_speed.install()  # a large grid's programs on every core (interpreter_speed.py)


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
