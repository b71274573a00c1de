"""fp8check's own reader, with vLLM's reader signature: the paged indexer logits from cache bytes decoded exactly
through the CacheSpec's layout, in float64 (plugins return fp32). The parity truth is this reader on the
baseline writer's bytes.
"""

from __future__ import annotations

import torch

from ..core import fp8
from ..core.spec import CacheSpec
from ..core.metrics import head_logits


def decode_blocks(spec: CacheSpec, flat: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
    """float64 [len(blocks) * block_size, head_dim]: each token's FP8 values times its group scales,
    tokens in block-table order. `flat` is the cache as uint8 [num_blocks, block_bytes]."""
    rows = flat[blocks.long()]
    codes = rows[:, spec.value_index(flat.device).view(-1)]  # (token, dim) order, whatever the layout
    values = fp8.decode(codes, spec.fp8).double().view(-1, spec.groups_per_token, spec.quant_block_size)
    scales = fp8.decode_scales(spec.scale_words(rows), spec.scale_fmt).view(-1, spec.groups_per_token, 1).double()
    return (values * scales).view(-1, spec.head_dim)


def paged_logits(spec: CacheSpec, q_codes: torch.Tensor, flat: torch.Tensor, weights: torch.Tensor,
                 context_lens: torch.Tensor, block_tables: torch.Tensor, max_model_len: int) -> torch.Tensor:
    """float64 [B * next_n, max_model_len], -inf where a query row sees nothing. q_codes: FP8 bytes
    [B, next_n, H, D]; query row n of sequence b sees context_lens[b] - next_n + n + 1 tokens."""
    batch, next_n = q_codes.shape[:2]
    q = fp8.decode(q_codes, spec.fp8).double()
    out = torch.full((batch * next_n, max_model_len), float("-inf"), dtype=torch.float64, device=flat.device)
    for b, ctx in enumerate(context_lens.view(batch, -1)[:, -1].tolist()):  # one pass per sequence
        num_blocks = -(-ctx // spec.block_size)
        keys = decode_blocks(spec, flat, block_tables[b, :num_blocks])[:ctx]
        rows = head_logits(keys, q[b], weights[b * next_n : (b + 1) * next_n])
        position = torch.arange(ctx, device=flat.device)
        visible = position.view(1, -1) <= (ctx - next_n + torch.arange(next_n, device=flat.device)).view(-1, 1)
        out[b * next_n : (b + 1) * next_n, :ctx] = torch.where(visible, rows, float("-inf"))
    return out


def make_reader(spec: CacheSpec):
    """The reference reader with vLLM's signature, reading caches of `spec`'s layout and FP8 format."""
    def reference_reader(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
        flat = kv_cache.reshape(kv_cache.shape[0], spec.block_bytes)
        return paged_logits(spec, q_fp8.view(torch.uint8), flat, weights, context_lens, block_tables, max_model_len)

    return reference_reader
