"""The `reference` writer: the PyTorch emulation of aiter's op (the oracle, the CPU's writer), or on CUDA its
Triton twin (triton.launch_reference, ~70x faster), used only once it wrote the PyTorch ops' bytes exactly on a
known-answer cache, proven once per (spec shape, device) in a process (docs/GPU.md). The proof runs the PyTorch
ops on the GPU: inf / inf gives a NaN with the sign bit set on an x86 CPU and not on the GPU (0xFF against 0x7F).
"""

from __future__ import annotations

import functools
import importlib.util

import torch

from ..core.cache import CacheBuffer
from ..core.inputs import Distribution, SlotPattern, generate, slot_numbers
from ..core.spec import CacheSpec, FP8Format, ScaleFormat
from ..core.reference import aiter_writer, spec_of_call

PROOF_BLOCKS = 4  # known-answer cache: 4 blocks, a quarter of the slots padding


def _triton_can_run(spec: CacheSpec, device: torch.device) -> bool:
    # The kernel writes planar caches with fp32 words (the emulation writes every form); compiled Triton on
    # NVIDIA has no fp8e4b8 (docs/NUMERICS.md).
    return device.type == "cuda" and spec.layout.planar and spec.scale_fmt is not ScaleFormat.UE8M0X4 \
        and not (spec.fp8 is FP8Format.E4M3FNUZ and torch.version.hip is None) \
        and importlib.util.find_spec("triton") is not None


def known_answer(spec: CacheSpec, device: torch.device) -> tuple[int, int]:
    """(differing bytes, bytes compared) between the Triton kernel and the PyTorch emulation on a small
    cache of this spec's shape, written from every adversarial distribution with inf and NaN."""
    from .triton import launch_reference as launch
    small = spec.replace(num_blocks=PROOF_BLOCKS)
    data = generate(small, seed=20261130, slots=SlotPattern.PADDED, distribution=Distribution.MIXED, inf_nan=True)
    data = data.to(device)
    expected, got = CacheBuffer.allocate(small, device), CacheBuffer.allocate(small, device)
    aiter_writer(data.k, expected.cache, data.slot_mapping, small.quant_block_size, small.scale_fmt.writer_arg,
                 fp8_dtype=small.fp8.torch_dtype(), layout=small.layout.value)
    launch(small, data.k, got.cache, data.slot_mapping)
    return int((expected.buffer != got.buffer).sum()), expected.buffer.numel()


@functools.lru_cache(maxsize=None)
def _proven(spec: CacheSpec, device: torch.device) -> bool:
    """The known answer, run once per (spec shape, device) in a process."""
    try:
        return known_answer(spec, device)[0] == 0
    except Exception:  # a kernel that cannot compile or run here is simply not used
        return False


def uses_triton(spec: CacheSpec, device: torch.device) -> bool:
    """Whether `reference` writes this spec on this device with the compiled kernel (proving it once)."""
    shape_key = spec.replace(num_blocks=1)  # the proof depends on everything but the cache's length
    return _triton_can_run(spec, device) and _proven(shape_key, torch.device(device))


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    """aiter's numerics (reference.AITER): the Triton kernel on a GPU once proven, else PyTorch ops."""
    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    if not uses_triton(spec, k.device):
        aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
        return
    from .triton import launch_reference as launch
    mapped, top, _ = slot_numbers(slot_mapping, spec.num_slots)  # one Triton kernel on CUDA, no torch max
    if mapped and top >= spec.num_slots:  # the emulation's own refusal
        raise ValueError(f"slot {top} is outside the cache ({spec.num_slots} slots)")
    launch(spec, k, kv_cache, slot_mapping)
