"""The truth and the metrics of `fp8check parity`, defined once (docs/parity.md "The truth and the columns"):
pure functions on tensors. All metrics pool the query rows of a sequence (`--next-n 2`: their tokens together)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from . import fp8
from .spec import FP8Format

DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-3  # in logit units; seeded logits are O(1) (README "Top-K parity")


def quantize_q(q: torch.Tensor, fmt: FP8Format) -> torch.Tensor:
    """FP8 bytes (uint8, q's shape) of the query: clamp to +-max, round to nearest even."""
    return fp8.encode(q.float(), fmt)


def visible_tokens(ctx: int, next_n: int) -> list[int]:
    """Tokens query row n of a ctx-token sequence sees: ctx - next_n + n + 1 (MTP, docs/NUMERICS.md)."""
    return [ctx - next_n + n + 1 for n in range(next_n)]


def is_vacuous(visible: list[int] | tuple[int, ...], k: int) -> bool:
    """Every query row sees <= k tokens: all of them are selected, so recall@k is 1 for any candidate."""
    return all(seen <= k for seen in visible)


def head_logits(keys: torch.Tensor, q: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """float64 [rows, T]: sum_h w[row, h] * relu(q[row, h] . keys[t]) for decoded keys [T, D] (float64),
    decoded q [rows, H, D] and weights [rows, H]."""
    scores = torch.einsum("rhd,td->rht", q.double(), keys.double()).clamp_(min=0)
    return torch.einsum("rh,rht->rt", weights.double(), scores)


@dataclass(frozen=True)
class Metrics:
    """One sequence's agreement between a candidate's logits and the truth, its query rows pooled."""

    recall: float
    positional: float
    max_rel: float
    bad: int
    n: int  # tokens compared (visible tokens summed over query rows)
    vacuous: bool  # every query row sees <= K tokens
    visible: tuple[int, ...]  # tokens each query row sees
    tie: bool = False  # recall < 1, and every wrongly selected token is within tolerance of the K-th logit
    missed: int = 0  # wrongly selected tokens (K * rows - correct)

    @property
    def lost(self) -> bool:
        """A recall loss that near-ties do not explain."""
        return self.recall < 1.0 and not self.tie

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "visible": list(self.visible)}


def recall_at_k(candidate: torch.Tensor, truth: torch.Tensor, k: int) -> tuple[int, int]:
    """(correct, selected) for one query row's visible logits (1-D, same length): of the candidate's
    min(k, T) selected tokens, how many have a truth logit >= the k-th largest truth logit."""
    kk = min(k, truth.numel())
    selected = torch.topk(candidate, kk).indices
    threshold = torch.topk(truth, kk).values[-1]
    return int((truth[selected] >= threshold).sum()), kk


def positional_at_k(candidate: torch.Tensor, truth: torch.Tensor, k: int) -> tuple[int, int]:
    """(agreeing positions, k) of the two ascending-sorted top-k index lists of one query row."""
    kk = min(k, truth.numel())
    mine, theirs = (torch.sort(torch.topk(logits, kk).indices).values for logits in (candidate, truth))
    return int((mine == theirs).sum()), kk


def compare_logits(candidate: torch.Tensor, truth: torch.Tensor, visible: list[int], k: int, *,
                   rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL) -> Metrics:
    """Metrics of one sequence: candidate [rows, >= max(visible)] (any float dtype), truth float64
    [rows, >= max(visible)]; row r is compared on its first visible[r] tokens only."""
    correct = agree = selected = bad = n = missed = 0
    ties = True
    worst_err, largest = [], []
    for row, seen in enumerate(visible):
        mine, theirs = candidate[row, :seen].double(), truth[row, :seen]
        hits, kk = recall_at_k(mine, theirs, k)
        same, _ = positional_at_k(mine, theirs, k)
        correct, agree, selected = correct + hits, agree + same, selected + kk
        if hits < kk:  # the wrongly selected tokens: each within tolerance of the K-th largest truth logit T?
            chosen, threshold = theirs[torch.topk(mine, kk).indices], torch.topk(theirs, kk).values[-1]
            wrong = chosen[chosen < threshold]
            missed += wrong.numel()
            ties = ties and bool(((threshold - wrong) <= atol + rtol * threshold.abs()).all())
        err = (mine - theirs).abs()
        bad += int((~(err <= atol + rtol * theirs.abs())).sum())
        n += seen
        worst_err.append(err.max())  # torch's max propagates NaN: a NaN logit makes max_rel NaN
        largest.append(theirs.abs().max())
    worst, scale = float(torch.stack(worst_err).max()), float(torch.stack(largest).max())
    max_rel = worst / scale if scale else (0.0 if worst == 0 else float("inf"))
    return Metrics(recall=correct / selected, positional=agree / selected, max_rel=max_rel, bad=bad, n=n,
                   vacuous=is_vacuous(visible, k), visible=tuple(visible), tie=bool(missed) and ties, missed=missed)
