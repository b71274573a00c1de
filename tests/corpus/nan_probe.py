"""One Triton kernel that puts NaN, inf and out-of-range values through every operation a writer or reader
applies to K or to logits: min/max per `propagate_nan`, tl.clamp (both lowerings: constant bounds +-L, the
`0 - L` form, other bounds), the reductions, argmax, tl.where, casts to FP8, bf16 and integers.

`run(device)` returns {operation: [result bits]}; compiled on an NVIDIA GPU those are the compiled truth
(`nan-probe-nvidia.json`, recorded by record.py), replayed in fp8check's CPU interpreter by
tests/test_compiled_corpus.py.
"""

from __future__ import annotations

import struct

import torch
import triton
import triton.language as tl

NAN, NEG_NAN = 0x7FC00000, 0xFFC00000
X_BITS = [NAN, NEG_NAN] + [struct.unpack("<I", struct.pack("<f", v))[0] for v in (
    float("inf"), float("-inf"), 0.0, -0.0, 1.5, -1.5, 500.0, -500.0, 1e30, 3e-39, 448.0, 449.0, 464.0, -0.1)]
Y_BITS = [struct.unpack("<I", struct.pack("<f", v))[0] for v in (1.0, 1.0)] + [NAN, NAN, NAN] + \
    [struct.unpack("<I", struct.pack("<f", v))[0] for v in (float("-inf"), float("inf"))] + [NAN] + \
    [struct.unpack("<I", struct.pack("<f", v))[0] for v in (-2.0, 2.0)] + [NAN] + \
    [struct.unpack("<I", struct.pack("<f", v))[0] for v in (1.0,)] + [NEG_NAN] + \
    [struct.unpack("<I", struct.pack("<f", v))[0] for v in (0.0, 0.0)] + [NAN]

OPERATIONS = (
    "minimum", "maximum", "minimum_all", "maximum_all",
    "clamp_const", "clamp_const_all", "clamp_const_asym", "clamp_runtime", "clamp_zero_minus",
    "clamp_const_of_quotient", "clamp_const_of_generated_nan", "clamp_runtime_of_quotient",
    "quotient", "generated_nan",
    "max_rows_x", "min_rows_x", "max_rows_y", "min_rows_y", "max_abs_rows_y", "argmax_rows_y", "argmin_rows_y",
    "reduce_maximum_rows_y", "maximum_scalar_floor",
    "where_positive", "where_self_equal",
    "to_e4m3fn", "quotient_to_e4m3fn", "to_bf16", "to_int32", "to_int64_low", "to_int8", "to_uint8", "to_uint32",
)


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def _probe(x_ptr, y_ptr, out_ptr, s, lo, hi, zero):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    row = tl.arange(0, 4)
    first4 = offs < 4
    xr = tl.reshape(x, (4, 4))
    yr = tl.reshape(y, (4, 4))
    q = x / s
    g = x * zero
    results = (
        tl.minimum(x, y), tl.maximum(x, y),
        tl.minimum(x, y, propagate_nan=tl.PropagateNan.ALL), tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL),
        tl.clamp(x, -448.0, 448.0), tl.clamp(x, -448.0, 448.0, propagate_nan=tl.PropagateNan.ALL),
        tl.clamp(x, -448.0, 240.0), tl.clamp(x, lo, hi), tl.clamp(x, 0 - hi, hi),
        tl.clamp(q, -448.0, 448.0), tl.clamp(g, -448.0, 448.0), tl.clamp(q, lo, hi),
        q, g,
    )
    for i in tl.static_range(len(results)):
        tl.store(out_ptr + i * 16 + offs, results[i].to(tl.int32, bitcast=True))
    base = len(results) * 16
    reduced = (tl.max(xr, 1), tl.min(xr, 1), tl.max(yr, 1), tl.min(yr, 1), tl.max(tl.abs(yr), 1))
    for i in tl.static_range(len(reduced)):
        tl.store(out_ptr + base + i * 16 + row, reduced[i].to(tl.int32, bitcast=True))
    base += len(reduced) * 16
    tl.store(out_ptr + base + row, tl.argmax(yr, 1).to(tl.int32))
    tl.store(out_ptr + base + 16 + row, tl.argmin(yr, 1).to(tl.int32))
    tl.store(out_ptr + base + 32 + row, tl.reduce(yr, 1, _max_combine).to(tl.int32, bitcast=True))
    tl.store(out_ptr + base + 48 + offs, tl.maximum(tl.max(tl.abs(y)), 1e-4).to(tl.int32, bitcast=True), mask=first4)
    base += 64
    tl.store(out_ptr + base + offs, tl.where(x > 0, x, -1.0).to(tl.int32, bitcast=True))
    tl.store(out_ptr + base + 16 + offs, tl.where(x == x, x, 7.0).to(tl.int32, bitcast=True))
    base += 32
    tl.store(out_ptr + base + offs, x.to(tl.float8e4nv).to(tl.uint8, bitcast=True).to(tl.int32))
    tl.store(out_ptr + base + 16 + offs, q.to(tl.float8e4nv).to(tl.uint8, bitcast=True).to(tl.int32))
    tl.store(out_ptr + base + 32 + offs, x.to(tl.bfloat16).to(tl.uint16, bitcast=True).to(tl.int32))
    tl.store(out_ptr + base + 48 + offs, x.to(tl.int32))
    tl.store(out_ptr + base + 64 + offs, x.to(tl.int64).to(tl.int32))
    tl.store(out_ptr + base + 80 + offs, x.to(tl.int8).to(tl.int32))
    tl.store(out_ptr + base + 96 + offs, x.to(tl.uint8).to(tl.int32))
    tl.store(out_ptr + base + 112 + offs, x.to(tl.uint32).to(tl.int32, bitcast=True))


def run(device: str) -> dict[str, list[int]]:
    """{operation: results} (float results as their fp32 bits, unsigned; reductions: the first 4)."""
    x = torch.tensor(X_BITS, dtype=torch.int64).to(torch.int32).view(torch.float32).to(device)
    y = torch.tensor(Y_BITS, dtype=torch.int64).to(torch.int32).view(torch.float32).to(device)
    out = torch.full((len(OPERATIONS) * 16,), -7, dtype=torch.int32, device=device)
    _probe[(1,)](x, y, out, 2.0, -448.0, 448.0, 0.0)
    rows = out.cpu().view(len(OPERATIONS), 16).tolist()
    narrow = {"max_rows_x", "min_rows_x", "max_rows_y", "min_rows_y", "max_abs_rows_y", "argmax_rows_y",
              "argmin_rows_y", "reduce_maximum_rows_y", "maximum_scalar_floor"}
    return {name: [v & 0xFFFFFFFF for v in (values[:4] if name in narrow else values)]
            for name, values in zip(OPERATIONS, rows)}
