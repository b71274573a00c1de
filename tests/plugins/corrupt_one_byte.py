"""A correct writer (the aiter reference) that then flips the low bit of one value byte:
block 1, byte 667 of the block. For block 64 / head_dim 128 / shuffle that is token 9, dim 43."""

import torch

from fp8check.core.reference import aiter_writer

BLOCK, BYTE = 1, 667


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
    flat = kv_cache.view(kv_cache.shape[0], -1)
    flat[BLOCK, BYTE] ^= 0x01
