"""Budgets (docs/compare.md "Budgets"): how much two caches may differ and still pass, decided after the diff.
Differing value bytes within `max_code_distance` codes (fp8.code_distance) are excused; every other differing
byte counts against the larger of `max_diff_bytes` and `max_diff_fraction` x the cache's bytes."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from .cache import CacheBuffer
from .diff import DiffResult
from .fp8 import NAN_DISTANCE, code_distance
from .spec import MAX_CODE_DISTANCE
from .errors import BudgetError

CHUNK_BLOCKS = 256  # blocks whose value regions are compared at once


@dataclass(frozen=True)
class Budget:
    max_diff_bytes: int = 0
    max_diff_fraction: float = 0.0
    max_code_distance: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.max_diff_bytes, int) or self.max_diff_bytes < 0:
            raise BudgetError(f"--max-diff-bytes must be a non-negative integer, got {self.max_diff_bytes!r}")
        fraction = self.max_diff_fraction
        if isinstance(fraction, bool) or not (isinstance(fraction, (int, float)) and 0.0 <= fraction <= 1.0):
            raise BudgetError(f"--max-diff-fraction must lie in [0, 1], got {self.max_diff_fraction!r}")
        if not isinstance(self.max_code_distance, int) or not 0 <= self.max_code_distance <= MAX_CODE_DISTANCE:
            raise BudgetError(f"--max-code-distance must be an integer in [0, {MAX_CODE_DISTANCE}],"
                              f" got {self.max_code_distance!r}")

    @property
    def exact(self) -> bool:
        return not (self.max_diff_bytes or self.max_diff_fraction or self.max_code_distance)


@dataclass(frozen=True)
class BudgetVerdict:
    budget: Budget
    excused: int  # differing value bytes within max_code_distance: not counted
    counted: int  # differing bytes that count against the byte / fraction allowance
    allowed: int
    worst_distance: int | None  # largest code distance of a differing value byte; None: none differs or not measured
    failed: tuple[str, ...]  # the budgets set and exceeded (option names without dashes), empty when within

    @property
    def within(self) -> bool:
        return self.counted <= self.allowed

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self.budget), "within": self.within, "excused": self.excused,
                "counted": self.counted, "allowed": self.allowed, "worst_distance": self.worst_distance,
                "failed": list(self.failed)}

    def describe(self) -> str:
        """How the diff met the budgets that were set; over budget, only the ones it exceeds."""
        b = self.budget
        parts: dict[str, str] = {}
        if b.max_code_distance:
            worst = self.worst_distance or 0
            shown = "NaN against a number" if worst == NAN_DISTANCE else str(worst)  # no two codes are that far
            text = f"max code distance {shown} {'<=' if worst <= b.max_code_distance else '>'} {b.max_code_distance}"
            if not (b.max_diff_bytes or b.max_diff_fraction) and self.counted:
                text += f", {self.counted} bytes not excused"
            parts["max-code-distance"] = text
        allowances = [f"--max-diff-bytes {b.max_diff_bytes}"] * bool(b.max_diff_bytes) + \
            [f"--max-diff-fraction {b.max_diff_fraction:g}"] * bool(b.max_diff_fraction)
        if allowances:
            counted = f"{self.counted} counted {'<=' if self.within else '>'} {self.allowed} allowed by {' / '.join(allowances)}"
            parts["max-diff-bytes" if b.max_diff_bytes else "max-diff-fraction"] = counted
        if self.within:
            return "; ".join(parts.values())
        return "exceeds " + "; ".join(text for name, text in parts.items() if name in self.failed)


def _value_distances(diff: DiffResult, baseline: CacheBuffer, candidate: CacheBuffer, limit: int) -> tuple[int, int]:
    """(differing value bytes within `limit` codes, worst distance) over the blocks whose values differ."""
    spec = diff.spec
    blocks = torch.nonzero(diff.value_diff).view(-1)
    excused, worst = 0, 0
    for start in range(0, blocks.numel(), CHUNK_BLOCKS):
        index = blocks[start : start + CHUNK_BLOCKS]
        a, b = (spec.value_part(side.flat.index_select(0, index)) for side in (baseline, candidate))
        differs = a != b
        distance = code_distance(a, b, spec.fp8)
        excused += int(torch.count_nonzero(differs & (distance <= limit)))
        worst = max(worst, int(torch.where(differs, distance, torch.zeros_like(distance)).max()))
    return excused, worst


def check(budget: Budget, diff: DiffResult, baseline: CacheBuffer, candidate: CacheBuffer) -> BudgetVerdict:
    """Decide a diff against a budget. Code distances are measured only when max_code_distance asks for them."""
    excused, worst = 0, None
    if budget.max_code_distance and not diff.identical:
        excused, worst = _value_distances(diff, baseline, candidate, budget.max_code_distance)
    counted = diff.diff_bytes - excused
    allowed = max(budget.max_diff_bytes, math.floor(budget.max_diff_fraction * diff.total_bytes))
    failed: list[str] = []
    if counted > allowed:  # name only the budgets that were set; with none of bytes / fraction set, the distance
        sized = budget.max_diff_bytes or budget.max_diff_fraction
        if budget.max_code_distance and ((worst or 0) > budget.max_code_distance or not sized):
            failed.append("max-code-distance")
        failed += [name for name, value in (("max-diff-bytes", budget.max_diff_bytes),
                                            ("max-diff-fraction", budget.max_diff_fraction)) if value]
    return BudgetVerdict(budget, excused, counted, allowed, worst, tuple(failed))
