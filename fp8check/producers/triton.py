"""fp8check's own Triton writer with the semantics of vLLM's ROCm Triton writer (docs/NUMERICS.md, row 2).

Per token: amax over all head_dim (one scale per token), s = max(amax, 1e-4) / DIV (448 on e4m3fn,
224 on e4m3fnuz), ue8m0 rounds s up to a power of two with log2/ceil/exp2, values are `x / s` with
Triton's fp32 `/`, converted to **the element type of the value pointer it is given**. That last
point is the seed bug's mechanism: the `fixed` wrapper views the value region as FP8, the `buggy`
wrapper passes the raw uint8 slice, and the same kernel then does a float -> uint8 integer conversion.

On the CPU the kernel runs under Triton's interpreter with fp8check's exact FP8 conversion
(triton_exact); on CUDA it is compiled. Tokens are tiled TOKENS per program: the bytes are those of
one program per token (no value depends on another token), and the interpreter's ~7 ms per program
is paid once per tile instead of once per token.
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
from ..core.spec import Layout, ScaleFormat
from ..core.reference import spec_of_call

TOKENS_PER_PROGRAM = {"cpu": 256, "cuda": 16}  # cuda: the fastest tiling on an H200 (docs/PERFORMANCE.md)


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


_kernel = triton.jit(_quant_and_cache)


def check(spec, device: torch.device) -> None:
    from ..triton_cpu.known_answers import require

    if not hasattr(tl.standard, "_elementwise_max"):
        raise ProducerError(f"Triton {triton.__version__} has no tl.standard._elementwise_max; this writer needs it")
    if not spec.layout.planar or spec.scale_fmt is ScaleFormat.UE8M0X4:
        raise ProducerError(
            f"the vLLM Triton writer writes planar caches with fp32 scale words; it cannot write --layout"
            f" {spec.layout.value} --scale-fmt {spec.scale_fmt.value}"
        )
    if spec.quant_block_size != spec.head_dim:
        raise ProducerError(
            f"the vLLM Triton writer computes one scale per token over all head_dim; it needs --qbs {spec.head_dim}"
            f" (got {spec.quant_block_size})"
        )
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
    on_cpu = k.device.type == "cpu"
    tokens = tokens or TOKENS_PER_PROGRAM["cpu" if on_cpu else "cuda"]
    grid = (triton.cdiv(num_tokens, tokens),)
    with cpu_kernels() if on_cpu else contextlib.nullcontext():  # on the CPU: the exact interpreter
        _kernel[grid](
            k, values, scales, slot_mapping, num_tokens, spec.num_slots, spec.block_size, spec.block_bytes,
            HEAD_DIM=spec.head_dim,
            TOKENS=tokens, DIV=spec.fp8.vllm_divisor, UE8M0=spec.scale_fmt is ScaleFormat.UE8M0,
            SHUFFLE=spec.layout is Layout.SHUFFLE,
        )


fixed_writer = functools.partial(launch, view_as_fp8=True)  # the fixed wrapper: the value region viewed as FP8
# The seed's buggy wrapper: the value region is passed as raw uint8, so .to() truncates to integers.
buggy_writer = functools.partial(launch, view_as_fp8=False)

