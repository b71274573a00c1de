"""Stage 1: where. Guard bytes and bytes of slots no token maps to are stray writes (value bytes of an
unmapped slot in a block some token maps into are first offered to `layout`, later). Pure functions: they
return claims and the units whose value bytes they took."""

from __future__ import annotations

import torch

from ..cache import CacheBuffer, poison_at
from .claims import Claim, unit_claim
from .frame import Frame
from .model import EXAMPLES, Category


def guards(baseline: CacheBuffer, candidate: CacheBuffer, cache_bytes: int) -> list[Claim]:
    """Guard bytes that differ: stray writes outside the cache."""
    a, b = baseline.guards, candidate.guards  # [front guard | back guard]
    differs = a != b
    count = int(differs.sum())
    if not count:
        return []
    guard = baseline.guard_bytes
    offset = torch.arange(2 * guard, device=a.device) - guard  # Example.guard_offset
    position = torch.where(offset < 0, offset, offset + cache_bytes) + guard  # in the whole buffer
    examples = tuple(("guard", int(o)) for o in offset[differs][:EXAMPLES].tolist())
    counts = {"guard": count, "candidate_guard": int((differs & (b != poison_at(position))).sum())}
    return [Claim(Category.STRAY_WRITE, count, None, examples, counts)]


def unmapped(frame: Frame, open_u: torch.Tensor) -> tuple[list[Claim], torch.Tensor]:
    """Scale words of unmapped slots, and whole units of blocks no token maps into: stray writes."""
    free = ~frame.mapped
    empty_block = free & ~frame.block_mapped[frame.block_i]
    claims = [unit_claim(frame, Category.STRAY_WRITE, free, value=False, scale=True),
              unit_claim(frame, Category.STRAY_WRITE, empty_block & open_u)]
    return claims, empty_block
