"""Writers that treat the uint8 cache as another dtype."""

import torch


def writes_floats(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.view(torch.float32).fill_(1.0)  # bytes 00 00 80 3f everywhere: a result, not a crash


def assigns_bf16(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.view(-1)[: k.numel()] = k.view(-1)  # float to uint8 copy of K's values: also just bytes


def views_as_int64(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.view(torch.int64)  # a cache row of 68 bytes cannot be viewed as int64: RuntimeError
