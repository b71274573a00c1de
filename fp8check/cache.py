"""Cache buffers: poisoned allocation with guard bytes, and the scatter of quantized rows to slots."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .spec import CacheSpec

# Bytes before and after the cache handed to a producer; a write there is a stray write.
GUARD_BYTES = 256


# poison(i) = (i * POISON_STEP + POISON_OFFSET) % 256; linear in i, so it splits into per-block and
# per-byte parts (the diagnosis relies on that to avoid int64 positions for the whole cache).
POISON_STEP, POISON_OFFSET = 151, 0x5B


def poison_at(position: torch.Tensor) -> torch.Tensor:
    """The poison fill at buffer positions (int64, any shape): position-dependent, so a byte left
    unwritten (or written at the wrong place) is visible, and identical in baseline and candidate."""
    return ((position * POISON_STEP + POISON_OFFSET) % 256).to(torch.uint8)


def poison(num_bytes: int, device=None) -> torch.Tensor:
    """The fill of every fresh buffer of num_bytes bytes.

    poison_at is periodic with period 256, so one period is repeated: a 138 MB buffer costs one uint8
    write instead of five passes over int64 positions (~2 ms of a 5 ms compare() on an H200)."""
    period = poison_at(torch.arange(256, device=device, dtype=torch.int64))
    return period.repeat(-(-num_bytes // 256))[:num_bytes]


@dataclass(frozen=True)
class CacheBuffer:
    """One poisoned allocation: guard | cache | guard. `cache` is the view a producer writes."""

    spec: CacheSpec
    buffer: torch.Tensor  # uint8 [GUARD + num_blocks*block_bytes + GUARD]

    @classmethod
    def allocate(cls, spec: CacheSpec, device) -> "CacheBuffer":
        return cls(spec, poison(2 * GUARD_BYTES + spec.num_blocks * spec.block_bytes, device))

    @property
    def flat(self) -> torch.Tensor:
        """uint8 [num_blocks, block_bytes]: one flat byte buffer per block."""
        return self.buffer[GUARD_BYTES : GUARD_BYTES + self.spec.num_blocks * self.spec.block_bytes].view(
            self.spec.num_blocks, self.spec.block_bytes
        )

    @property
    def cache(self) -> torch.Tensor:
        """uint8 [num_blocks, block_size, head_dim + 4*head_dim/qbs]: the de-facto writer argument."""
        return self.flat.view(self.spec.num_blocks, self.spec.block_size, self.spec.row_bytes)

    @property
    def guards(self) -> torch.Tensor:
        return torch.cat([self.buffer[:GUARD_BYTES], self.buffer[-GUARD_BYTES:]])


def scatter_rows(
    spec: CacheSpec,
    cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    codes: torch.Tensor,
    scales: torch.Tensor,
) -> None:
    """Write FP8 codes (uint8 [T, head_dim]) and fp32 scales ([T, head_dim/qbs]) of each token to its
    slot, in the spec's layout; tokens with a negative slot write nothing."""
    flat = cache.view(spec.num_blocks, spec.block_bytes).view(-1)
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].to(torch.int64)
    if slots.numel() and int(slots.max()) >= spec.num_slots:
        raise ValueError(f"slot {int(slots.max())} is outside the cache ({spec.num_slots} slots)")
    block, token = slots // spec.block_size, slots % spec.block_size
    base = (block * spec.block_bytes).view(-1, 1)
    value_pos = base + spec.value_index(cache.device)[token]
    flat[value_pos.reshape(-1)] = codes[keep].reshape(-1)
    scale_bytes = scales[keep].to(torch.float32).contiguous().view(torch.uint8)  # little-endian fp32
    first = base + spec.value_bytes + 4 * spec.groups_per_token * token.view(-1, 1)
    scale_pos = first + torch.arange(4 * spec.groups_per_token, device=cache.device).view(1, -1)
    flat[scale_pos.reshape(-1)] = scale_bytes.reshape(-1)
