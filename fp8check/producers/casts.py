"""A kernel that converts between FP8 and an integer type: the seed's bug where Triton refuses it.

Triton has no cast between an FP8 type and an integer type (triton.language.semantic: "cannot cast ... to
..."), in compiled kernels and the interpreter alike. A kernel meets it when its value pointer is uint8 (a
value region not viewed as FP8) and it stores FP8 values through it, or when it converts x/s to uint8 and
stores that through an FP8 pointer. The interpreter's message carries the whole value array; this names the
cause instead, with the seed's fix.
"""

from __future__ import annotations

import re

_CANNOT_CAST = re.compile(r"cannot cast .* to .*?\b(u?int\d+|fp8\w*|float8\w*)\W*$", re.S)


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def fp8_integer_cast(exc: BaseException) -> str | None:
    """The one-line reason for a failed FP8 <-> integer cast inside a kernel, or None for any other failure."""
    for link in _chain(exc):
        match = _CANNOT_CAST.search(str(link))
        if match is None:
            continue
        target = match.group(1)
        if target.startswith(("u", "int")):
            what = f"stores FP8 values through a {target} pointer"
        else:
            what = f"stores integer values (x/s converted by .to() to an integer type) through an {target} pointer"
        return (f"the kernel {what}: Triton cannot cast between FP8 and integer types (a compile error on the GPU"
                " as well), the seed's integer-cast bug; view the value region as the FP8 dtype before launching"
                " and convert x/s with .to(the pointer's FP8 element type)")
    return None
