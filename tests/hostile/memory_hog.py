"""A writer that allocates far more memory than it needs (16 GiB), as a leak or a bad size would."""

import torch


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    torch.ones(16 * 2**30, dtype=torch.uint8)
