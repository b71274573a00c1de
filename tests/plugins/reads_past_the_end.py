"""The reference writer with an off-by-one token mask (`token <= num_tokens`): it reads one slot and one
K row past the end of its inputs, as a kernel whose last program holds token num_tokens does."""

import torch

from fp8check.core.reference import aiter_writer


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
    n = k.shape[0]
    past_k = torch.as_strided(k, (n + 1, k.shape[1]), k.stride())
    past_slots = torch.as_strided(slot_mapping, (n + 1,), slot_mapping.stride())
    aiter_writer(past_k, kv_cache, past_slots, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
