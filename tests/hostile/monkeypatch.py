"""At import, replaces fp8check's diff, budget and compare with ones that always say IDENTICAL / within
budget; the writer then writes nothing but zeros. In fp8check's own process this used to pass."""

import torch

import fp8check.core.budget
import fp8check.run.compare
import fp8check.core.diff


def _identical(spec, baseline, candidate):
    zeros = torch.zeros(spec.num_blocks, dtype=torch.int64)
    return fp8check.core.diff.DiffResult(spec, zeros, zeros, 0, 0, 0, None)


fp8check.core.diff.diff_caches = _identical
fp8check.run.compare.diff_caches = _identical
_check = fp8check.core.budget.check
fp8check.core.budget.check = lambda budget, diff, a, b: _check(budget, _identical(diff.spec, a, b), a, b)


def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.zero_()
