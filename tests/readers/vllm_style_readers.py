"""A vLLM-STYLE source file written for the tests (not vLLM's code): the module-level imports and globals
of vllm/v1/attention/ops/rocm_aiter_mla_sparse.py (SPEC.md section 6b) around a reader with the name and
signature of vLLM's `fp8_paged_mqa_logits_torch`, reading the value region row-major ("block-flat") as
vLLM's readers do. It imports vLLM, so it runs only through the `vllm-file:` loader, which provides those
modules; pytest never imports it.
"""

import torch
import torch.nn.functional as F

from vllm.platforms import current_platform
from vllm.triton_utils import tl, triton  # noqa: F401  (as the real file imports them)

FP8_DTYPE = current_platform.fp8_dtype()


def fp8_paged_mqa_logits_torch(q, kv_cache, weights, context_lens, block_tables, max_model_len):
    from vllm.utils.math_utils import cdiv

    batch, next_n, _, dim = q.shape
    num_blocks, block_size = kv_cache.shape[:2]
    flat = kv_cache.reshape(num_blocks, -1)
    values = flat[:, : block_size * dim].contiguous().view(FP8_DTYPE).float().view(num_blocks, block_size, dim)
    scales = flat[:, block_size * dim : block_size * (dim + 4)].contiguous().view(torch.float32)
    keys = values * scales.view(num_blocks, block_size, 1)
    out = torch.full((batch * next_n, max_model_len), float("-inf"), device=q.device)
    for b in range(batch):
        ctx = int(context_lens[b])
        k = keys[block_tables[b, : cdiv(ctx, block_size)].long()].reshape(-1, dim)[:ctx]
        for n in range(next_n):
            seen = ctx - next_n + n + 1
            scores = F.relu(q[b, n].float() @ k[:seen].T)
            out[b * next_n + n, :seen] = (weights[b * next_n + n].view(-1, 1) * scores).sum(0)
    return out
