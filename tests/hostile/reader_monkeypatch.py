"""A reader that, at import, replaces fp8check's top-K metrics with ones that always score a perfect
recall, then returns constant logits (no ranking at all). In fp8check's own process this passed."""

import torch

import fp8check.run.parity
import fp8check.core.metrics as metrics


def _perfect(candidate, truth, visible, k, **tolerances):
    return metrics.Metrics(recall=1.0, positional=1.0, max_rel=0.0, bad=0, n=sum(visible), vacuous=False,
                           visible=tuple(visible))


metrics.compare_logits = _perfect
metrics.recall_at_k = lambda candidate, truth, k: (min(k, truth.numel()), min(k, truth.numel()))
fp8check.run.parity.compare_logits = _perfect


def paged_mqa_logits(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
    return torch.zeros(q_fp8.shape[0] * q_fp8.shape[1], max_model_len)
