"""Reader plugins that misbehave, for the tests: each must end in one clear error line, never a verdict."""

import torch


def raises(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    raise RuntimeError("deliberate failure inside the reader\nsecond line of detail")


def wrong_shape(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    return torch.zeros(max_model_len)  # one row, not [B*next_n, max_model_len]


def not_a_tensor(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    return [0.0] * max_model_len


def scribbles(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    """Overwrites every argument it is given, then returns constant logits."""
    for tensor in (q_fp8.view(torch.uint8), kv_cache, weights, context_lens, block_tables):
        tensor.zero_()
    return torch.zeros(q_fp8.shape[0] * q_fp8.shape[1], max_model_len)


def wrong_signature(q_fp8, kv_cache):
    return None
