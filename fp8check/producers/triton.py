"""fp8check's own Triton writer with the semantics of vLLM's ROCm Triton writer (docs/NUMERICS.md, writer
numerics): one scale per token, values `x / s` with Triton's fp32 `/`, converted to **the element type of the
value pointer it is given**: the seed bug's mechanism (the `fixed` wrapper views the value region as FP8, the
`buggy` one passes the raw uint8 slice, and the kernel then converts float -> uint8). Tokens are tiled TOKENS
per program (no value depends on another token), so the CPU interpreter's ~7 ms per program is paid per tile.

Also the aiter profile's kernel: the `reference` writer on CUDA (reference_device.py, docs/GPU.md), every step
written so that compiled Triton cannot round it differently from the PyTorch ops it is proven against.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import triton
import triton.language as tl

from ..core.errors import ProducerError
from ..core.device import require_triton_format
from ..triton_cpu.interpreter import cpu_kernels
from ..core.spec import CacheSpec, Layout, ScaleFormat
from ..core.reference import spec_of_call

TOKENS_PER_PROGRAM = {"cpu": 256, "cuda": 16}  # cuda: the fastest tiling on an H200 (docs/PERFORMANCE.md)


@triton.jit
def _quant_and_cache(
    k_ptr,  # bf16 [num_tokens, HEAD_DIM]
    value_ptr,  # value region of block 0; element type: the spec's FP8 (fixed) or uint8 (buggy)
    scale_ptr,  # the whole cache viewed as fp32
    slot_ptr,  # int64 [num_tokens]
    num_tokens,
    num_slots,  # slots of the cache: a slot outside [0, num_slots) writes nothing, never out of bounds
    block_size,
    block_bytes,  # bytes per block (= stride of the value view)
    HEAD_DIM: tl.constexpr,
    TOKENS: tl.constexpr,
    DIV: tl.constexpr,
    UE8M0: tl.constexpr,
    SHUFFLE: tl.constexpr,
):
    token = tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)
    in_range = token < num_tokens
    slot = tl.load(slot_ptr + token, mask=in_range, other=-1)
    write = (slot >= 0) & (slot < num_slots)  # padding tokens write nothing
    dim = tl.arange(0, HEAD_DIM)
    x = tl.load(k_ptr + token[:, None].to(tl.int64) * HEAD_DIM + dim[None, :], mask=write[:, None], other=0.0)
    x = x.to(tl.float32)
    # tl.reduce with the standard max combiner, not tl.max: tl.max is a @jit helper, which the
    # interpreter can only call when TRITON_INTERPRET was set before Triton was imported, while this
    # combiner has the interpreter's vectorized fast path and compiles to the same reduction.
    amax = tl.reduce(tl.abs(x), 1, tl.standard._elementwise_max)
    scale = tl.maximum(amax, 1e-4) / DIV
    if UE8M0:
        scale = tl.exp2(tl.ceil(tl.log2(scale)))
    y = x / scale[:, None]
    block = slot // block_size
    t = (slot % block_size)[:, None]
    if SHUFFLE:
        offset = (t // 16) * (16 * HEAD_DIM) + (dim[None, :] // 16) * 256 + (t % 16) * 16 + dim[None, :] % 16
    else:
        offset = t * HEAD_DIM + dim[None, :]
    base = block * block_bytes
    tl.store(value_ptr + base[:, None] + offset, y.to(value_ptr.dtype.element_ty), mask=write[:, None])
    scale_index = (base + block_size * HEAD_DIM) // 4 + slot % block_size
    tl.store(scale_ptr + scale_index, scale, mask=write)


# One kernel body, the aiter numerics step by step, so that it reads like core/reference.py.
@triton.jit
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
    magnitude = tl.abs(x)  # amax drops NaN operands, as aiter's IEEE-mode v_max3_f32 / fmaxf (and a GPU max) do
    amax = tl.reduce(tl.where(magnitude != magnitude, 0.0, magnitude), 1, tl.standard._elementwise_max)
    clamped = tl.maximum(amax, 1e-4)
    # div_rn: compiled `/` is an approximate division on NVIDIA (docs/NUMERICS.md)
    scale = tl.math.div_rn(clamped, tl.full([TOKENS], DIV, tl.float32))
    if UE8M0:  # 2 ** ceil(log2(s)) from the bits: no log2/exp2 rounding, inf and NaN kept
        sbits = scale.to(tl.int32, bitcast=True)
        exponent = (sbits >> 23) + ((sbits & 0x7FFFFF) != 0).to(tl.int32)
        finite = (sbits & 0x7F800000) != 0x7F800000
        scale = tl.where(finite, (exponent << 23).to(tl.float32, bitcast=True), scale)
    inverse = tl.math.div_rn(tl.full([TOKENS], 1.0, tl.float32), scale)
    y = x * inverse[:, None]  # one IEEE multiplication
    # clamp, a NaN to -max (aiter's v_med3_f32(NaN, -max, max)); the cast saturates and rounds to nearest even
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


def check(spec, device: torch.device) -> None:
    from ..triton_cpu.known_answers import require
    if not hasattr(tl.standard, "_elementwise_max"):
        raise ProducerError(f"Triton {triton.__version__} has no tl.standard._elementwise_max; this writer needs it")
    wrong = [*([f"--layout {spec.layout.value}"] if not spec.layout.planar else []),
             *(["--scale-fmt ue8m0x4"] if spec.scale_fmt is ScaleFormat.UE8M0X4 else []),
             *([f"--layers {spec.layers}"] if spec.layers > 1 else [])]
    if wrong:
        raise ProducerError(f"fp8check's Triton writer (vLLM's ROCm semantics) writes one planar layer with fp32 scale"
                            f" words; it cannot write {' '.join(wrong)}")
    if spec.quant_block_size != spec.head_dim:
        raise ProducerError(f"fp8check's Triton writer computes one scale per token over all head_dim; it needs"
                            f" --qbs {spec.head_dim} (got {spec.quant_block_size})")
    if device.type == "cuda":
        require_triton_format(spec.fp8, device)
        return
    require(spec.fp8)


def launch(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
           layout=None, view_as_fp8: bool = True, tokens: int | None = None) -> None:
    """`tokens`: tokens per program, a power of two (default TOKENS_PER_PROGRAM for the device); the
    bytes are the same for every tiling, only the time differs."""
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    num_tokens = k.shape[0]
    values = kv_cache.view(spec.num_blocks, spec.block_bytes)[:, : spec.value_bytes]
    if view_as_fp8:  # the fix: the kernel's .to(element type) is then an FP8 quantization
        values = values.view(fp8_dtype)
    scales = kv_cache.view(-1).view(torch.float32)
    tokens = tokens or TOKENS_PER_PROGRAM["cpu" if k.device.type == "cpu" else "cuda"]
    _run(_quant_and_cache, (triton.cdiv(num_tokens, tokens),), k, values, scales, slot_mapping, num_tokens,
         spec.num_slots, spec.block_size, spec.block_bytes, HEAD_DIM=spec.head_dim, TOKENS=tokens,
         DIV=spec.fp8.vllm_divisor, UE8M0=spec.scale_fmt is ScaleFormat.UE8M0,
         SHUFFLE=spec.layout is Layout.SHUFFLE)


def _run(kernel, grid: tuple, *args, **constants) -> None:
    with cpu_kernels() if args[0].device.type == "cpu" else contextlib.nullcontext():  # CPU: exact
        kernel[grid](*args, **constants)


def launch_reference(spec: CacheSpec, k: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Write k's rows to their slots with the aiter profile's numerics (compiled, or interpreted on the CPU)."""
    if k.shape[0] == 0:
        return
    values = kv_cache.view(spec.num_blocks, spec.block_bytes)[:, : spec.value_bytes].view(spec.fp8.torch_dtype())
    tokens = TOKENS_PER_PROGRAM["cpu" if k.device.type == "cpu" else "cuda"]
    _run(_aiter_quant_and_cache, (triton.cdiv(k.shape[0], tokens), spec.groups_per_token), k, values,
         kv_cache.view(-1).view(torch.float32), slot_mapping, k.shape[0], spec.block_size, spec.block_bytes,
         HEAD_DIM=spec.head_dim, QBS=spec.quant_block_size, GROUPS=spec.groups_per_token,
         BLOCK_Q=triton.next_power_of_2(spec.quant_block_size), TOKENS=tokens, DIV=spec.fp8.max,
         FP8_MAX=spec.fp8.max, UE8M0=spec.scale_fmt is ScaleFormat.UE8M0, SHUFFLE=spec.layout is Layout.SHUFFLE)


fixed_writer = functools.partial(launch, view_as_fp8=True)  # the fixed wrapper: the value region as FP8
# The seed's buggy wrapper: the value region is passed as raw uint8, so .to() truncates to integers.
buggy_writer = functools.partial(launch, view_as_fp8=False)

