"""A reader plugin written for the tests (not copied from anywhere): vLLM's reader signature, reading the
value region ROW-MAJOR ("block-flat": token t's values at byte t*D + d of its block) whatever the block
size, one fp32 scale per token, fp32 math. That is how vLLM's ROCm fallback readers read (SPEC.md
section 7): right on a LINEAR cache, wrong bytes on a SHUFFLE one.
"""

import torch


def paged_mqa_logits(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    batch, next_n, _, dim = q_fp8.shape
    num_blocks, block_size = kv_cache.shape[:2]
    blocks = kv_cache.reshape(num_blocks, -1)
    values = blocks[:, : block_size * dim].contiguous().view(q_fp8.dtype).float()
    scales = blocks[:, block_size * dim : block_size * (dim + 4)].contiguous().view(torch.float32)
    keys = values.view(num_blocks, block_size, dim) * scales.view(num_blocks, block_size, 1)
    q = q_fp8.float()
    out = torch.full((batch * next_n, max_model_len), float("-inf"), device=q.device)
    for b in range(batch):
        ctx = int(context_lens[b])
        used = (ctx + block_size - 1) // block_size
        k = keys[block_tables[b, :used].long()].reshape(-1, dim)[:ctx]
        for n in range(next_n):
            seen = ctx - next_n + n + 1
            scores = torch.relu(q[b, n] @ k[:seen].T)  # [heads, seen]
            out[b * next_n + n, :seen] = (weights[b * next_n + n].view(-1, 1) * scores).sum(0)
    return out
