"""Correct writers (the aiter reference) that also write outside the cache they were handed.

`before_D` / `after_D` (any D >= 1, made on demand) flip one byte D bytes before the cache's first byte
or D - 1 bytes past its last one. `slot_past_end` also writes token 0 as if its slot were num_slots
(an off-by-one slot: the block after the cache, in the spec's layout); `block_before` writes token 0
into block -1."""

import torch

from fp8check.core.spec import CacheSpec
from fp8check.core.reference import aiter_writer, spec_of_call


def _outside(kv_cache: torch.Tensor, start: int, length: int) -> torch.Tensor:
    """`length` bytes of the storage under kv_cache starting `start` bytes from its first byte."""
    return torch.as_strided(kv_cache, (length,), (1,), kv_cache.storage_offset() + start)


def _one_byte(distance: int, after: bool):
    def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
               layout=None):
        aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
        start = kv_cache.numel() + distance - 1 if after else -distance
        _outside(kv_cache, start, 1).bitwise_xor_(0xFF)

    return writer


def __getattr__(name: str):
    side, _, distance = name.partition("_")
    if side in ("before", "after") and distance.isdigit() and int(distance) >= 1:
        return _one_byte(int(distance), side == "after")
    raise AttributeError(name)


def _token0_in(kv_cache, k, quant_block_size, scale_fmt, fp8_dtype, layout, block: int) -> None:
    """Token 0 written as the reference writes it, into block `block` counted from the cache's start."""
    spec: CacheSpec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    one = spec.replace(num_blocks=1)
    written = torch.zeros(one.block_bytes, dtype=torch.bool)
    for fill in (0x00, 0xFF):  # a byte the writer wrote differs from at least one of the two fills
        scratch = torch.full((one.block_bytes,), fill, dtype=torch.uint8)
        aiter_writer(k[:1], scratch.view(1, one.block_size, one.row_bytes), torch.zeros(1, dtype=torch.int64),
                     quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
        written |= scratch != fill
    target = _outside(kv_cache, block * spec.block_bytes, spec.block_bytes)
    target[written] = scratch[written]


def slot_past_end(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
                  layout=None):
    aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
    _token0_in(kv_cache, k, quant_block_size, scale_fmt, fp8_dtype, layout, kv_cache.shape[0])


def block_before(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
                 layout=None):
    aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
    _token0_in(kv_cache, k, quant_block_size, scale_fmt, fp8_dtype, layout, -1)
