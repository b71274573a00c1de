"""Inputs of a writer run: seeded bf16 K and a slot mapping, or a replayed safetensors file."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

import torch

from .spec import CacheSpec


class InputError(ValueError):
    """Unusable inputs; the message is one line naming the file or option."""


class SlotPattern(enum.Enum):
    SEQUENTIAL = "sequential"
    SHUFFLED = "shuffled"
    PADDED = "padded"  # -1 entries mixed in: those tokens must write nothing
    SPARSE = "sparse"  # odd blocks get no token at all


class Distribution(enum.Enum):
    NORMAL = "normal"


@dataclass(frozen=True)
class Inputs:
    k: torch.Tensor  # bf16 [num_tokens, head_dim], contiguous
    slot_mapping: torch.Tensor  # int64 [num_tokens]
    source: str  # how they were made, for reports

    def to(self, device) -> "Inputs":
        return Inputs(self.k.to(device), self.slot_mapping.to(device), self.source)


def make_slot_mapping(spec: CacheSpec, pattern: SlotPattern, generator: torch.Generator) -> torch.Tensor:
    slots = torch.arange(spec.num_slots, dtype=torch.int64)
    if pattern is SlotPattern.SEQUENTIAL:
        return slots
    if pattern is SlotPattern.SHUFFLED:
        return slots[torch.randperm(spec.num_slots, generator=generator)]
    if pattern is SlotPattern.PADDED:
        num_pad = max(1, spec.num_slots // 4)
        order = torch.randperm(spec.num_slots + num_pad, generator=generator)
        mixed = torch.cat([slots, torch.full((num_pad,), -1, dtype=torch.int64)])
        return mixed[order]
    if pattern is SlotPattern.SPARSE:
        block = slots // spec.block_size
        return slots[block % 2 == 0]
    raise AssertionError(pattern)


def make_k(num_tokens: int, head_dim: int, distribution: Distribution, generator: torch.Generator) -> torch.Tensor:
    if distribution is Distribution.NORMAL:
        # Rows of different magnitude (2^-3 .. 2^3), so scales vary from token to token.
        row_scale = torch.exp2(torch.rand(num_tokens, 1, generator=generator) * 6 - 3)
        return (torch.randn(num_tokens, head_dim, generator=generator) * row_scale).to(torch.bfloat16)
    raise AssertionError(distribution)


def generate(
    spec: CacheSpec, *, seed: int, slots: SlotPattern = SlotPattern.SEQUENTIAL,
    distribution: Distribution = Distribution.NORMAL,
) -> Inputs:
    """Deterministic inputs: generated on the CPU, so every device sees the same bits."""
    generator = torch.Generator().manual_seed(seed)
    slot_mapping = make_slot_mapping(spec, slots, generator)
    k = make_k(slot_mapping.numel(), spec.head_dim, distribution, generator)
    return Inputs(k, slot_mapping, f"{distribution.value} K, {slots.value} slots, seed {seed}")


def load(path: Path) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file, with one-line errors for missing, unreadable or foreign files."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise InputError(f"{path}: not a readable safetensors file ({str(exc).splitlines()[0]})") from None


def validate(path: Path, k: torch.Tensor | None, slot_mapping: torch.Tensor | None, spec: CacheSpec | None) -> None:
    if k is None:
        raise InputError(f"{path}: has no tensor 'k'")
    if k.dtype != torch.bfloat16 or k.dim() != 2:
        raise InputError(f"{path}: 'k' must be bf16 [num_tokens, head_dim], got {k.dtype} {list(k.shape)}")
    if slot_mapping is not None:
        if slot_mapping.dtype != torch.int64 or slot_mapping.shape != (k.shape[0],):
            raise InputError(
                f"{path}: 'slot_mapping' must be int64 [{k.shape[0]}], got {slot_mapping.dtype} {list(slot_mapping.shape)}"
            )
    if spec is None:
        return
    if k.shape[1] != spec.head_dim:
        raise InputError(f"{path}: 'k' has head_dim {k.shape[1]} but --head-dim is {spec.head_dim}")
    if slot_mapping is not None and slot_mapping.numel() and int(slot_mapping.max()) >= spec.num_slots:
        raise InputError(
            f"{path}: slot {int(slot_mapping.max())} does not fit {spec.num_blocks} blocks of {spec.block_size}"
            " (raise --num-blocks)"
        )


def read_inputs(path: Path) -> Inputs:
    """Replay a dumped tensor: `k` (bf16 [T, head_dim]) and optional `slot_mapping` (int64 [T])."""
    tensors = load(path)
    k, slot_mapping = tensors.get("k"), tensors.get("slot_mapping")
    validate(path, k, slot_mapping, None)
    if slot_mapping is None:
        slot_mapping = torch.arange(k.shape[0], dtype=torch.int64)
    return Inputs(k.contiguous(), slot_mapping.contiguous(), f"replayed from {path.name}")


def blocks_needed(inputs: Inputs, block_size: int) -> int:
    top = int(inputs.slot_mapping.max()) if inputs.slot_mapping.numel() else -1
    return max(1, top // block_size + 1)
