"""The aiter profile (docs/NUMERICS.md, row 1) as a Triton kernel: the `reference` writer on CUDA.

The PyTorch emulation in reference.py is the oracle (and the writer on the CPU); this kernel computes
the same bytes ~70x faster on a GPU. Every step is written so that compiled Triton cannot round it
differently from the PyTorch ops:
- FTZ from the exponent bits (no float compare that an FTZ mode could change);
- amax drops NaN operands, as aiter's IEEE-mode v_max3_f32 / fmaxf do (and a GPU `max` does);
- `amax / DIV` and `1 / s` with `tl.math.div_rn` (compiled `/` is an approximate division on NVIDIA,
  docs/NUMERICS.md), the value `x * (1/s)`: one IEEE multiplication;
- ue8m0 `2 ** ceil(log2(s))` from the bits (no log2/exp2 rounding), inf and NaN kept;
- clamp to +-max, a NaN value to -max (aiter's v_med3_f32(NaN, -max, max)), then the FP8 cast (saturating, round-to-nearest-even: docs/NUMERICS.md
  section 4; under the interpreter, fp8check's exact conversion does it).
One program covers TOKENS tokens of one quant group. tests/test_perf_paths.py proves the bytes equal to
the PyTorch reference under the interpreter; reference_device.py proves it again at first use on a GPU.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from ..triton_cpu.interpreter import cpu_kernels
from ..core.spec import CacheSpec, Layout, ScaleFormat

TOKENS_PER_PROGRAM = {"cpu": 256, "cuda": 16}


# One kernel body (52 lines): the aiter numerics step by step, kept in one piece so it reads like the
# PyTorch reference it is proven against (core/reference.py).
def _aiter_quant_and_cache(
    k_ptr,  # bf16 [num_tokens, HEAD_DIM]
    value_ptr,  # value region of block 0, viewed as the FP8 dtype
    scale_ptr,  # the whole cache viewed as fp32
    slot_ptr,  # int64 [num_tokens]
    num_tokens,
    block_size,
    block_bytes,
    HEAD_DIM: tl.constexpr,
    QBS: tl.constexpr,
    BLOCK_Q: tl.constexpr,  # QBS rounded up to a power of two
    GROUPS: tl.constexpr,
    TOKENS: tl.constexpr,
    DIV: tl.constexpr,
    FP8_MAX: tl.constexpr,
    UE8M0: tl.constexpr,
    SHUFFLE: tl.constexpr,
):
    token = tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)
    group = tl.program_id(1)
    slot = tl.load(slot_ptr + token, mask=token < num_tokens, other=-1)
    write = slot >= 0
    q = tl.arange(0, BLOCK_Q)
    dim = group * QBS + q
    mask = write[:, None] & (q < QBS)[None, :]
    x = tl.load(k_ptr + token[:, None].to(tl.int64) * HEAD_DIM + dim[None, :], mask=mask, other=0.0).to(tl.float32)
    bits = x.to(tl.int32, bitcast=True)
    # FTZ: an fp32 denormal (exponent field 0) becomes a zero of its sign
    x = tl.where((bits & 0x7F800000) == 0, (bits & -2147483648).to(tl.float32, bitcast=True), x)
    magnitude = tl.abs(x)
    amax = tl.reduce(tl.where(magnitude != magnitude, 0.0, magnitude), 1, tl.standard._elementwise_max)
    clamped = tl.maximum(amax, 1e-4)
    scale = tl.math.div_rn(clamped, tl.full([TOKENS], DIV, tl.float32))
    if UE8M0:
        sbits = scale.to(tl.int32, bitcast=True)
        exponent = (sbits >> 23) + ((sbits & 0x7FFFFF) != 0).to(tl.int32)
        finite = (sbits & 0x7F800000) != 0x7F800000
        scale = tl.where(finite, (exponent << 23).to(tl.float32, bitcast=True), scale)
    inverse = tl.math.div_rn(tl.full([TOKENS], 1.0, tl.float32), scale)
    y = x * inverse[:, None]
    y = tl.where(y != y, -FP8_MAX, tl.minimum(tl.maximum(y, -FP8_MAX), FP8_MAX))
    block = slot // block_size
    t = (slot % block_size)[:, None]
    if SHUFFLE:
        offset = (t // 16) * (16 * HEAD_DIM) + (dim[None, :] // 16) * 256 + (t % 16) * 16 + dim[None, :] % 16
    else:
        offset = t * HEAD_DIM + dim[None, :]
    base = block * block_bytes
    tl.store(value_ptr + base[:, None] + offset, y.to(value_ptr.dtype.element_ty), mask=mask)
    scale_index = (base + block_size * HEAD_DIM) // 4 + (slot % block_size) * GROUPS + group
    tl.store(scale_ptr + scale_index, scale, mask=write)


_kernel = triton.jit(_aiter_quant_and_cache)


def launch(spec: CacheSpec, k: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Write k's rows to their slots with the aiter profile's numerics (compiled, or interpreted on the CPU)."""
    values = kv_cache.view(spec.num_blocks, spec.block_bytes)[:, : spec.value_bytes].view(spec.fp8.torch_dtype())
    scales = kv_cache.view(-1).view(torch.float32)
    on_cpu = k.device.type == "cpu"
    tokens = TOKENS_PER_PROGRAM["cpu" if on_cpu else "cuda"]
    grid = (triton.cdiv(k.shape[0], tokens), spec.groups_per_token)
    if k.shape[0] == 0:
        return
    with cpu_kernels() if on_cpu else contextlib.nullcontext():  # on the CPU: the exact interpreter
        _kernel[grid](
            k, values, scales, slot_mapping, k.shape[0], spec.block_size, spec.block_bytes, HEAD_DIM=spec.head_dim,
            QBS=spec.quant_block_size, BLOCK_Q=triton.next_power_of_2(spec.quant_block_size),
            GROUPS=spec.groups_per_token, TOKENS=tokens, DIV=spec.fp8.max, FP8_MAX=spec.fp8.max,
            UE8M0=spec.scale_fmt is ScaleFormat.UE8M0, SHUFFLE=spec.layout is Layout.SHUFFLE,
        )
