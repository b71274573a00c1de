"""inputs.check_slots' counts as one Triton kernel (CUDA): the torch ops cost nothing on a warm GPU but
~80-130 ms at their first use in a process (each loads its kernels; bench/gpu_first_use.py), and the slot
check is the first thing a GPU run does. Imported only for a GPU run; tests prove it equal to the torch
counts under the interpreter, the H200 run proves it on the GPU (bench/gpu_slots.py).

One pass: each program counts its mapped tokens (slot >= 0), takes their largest slot, and adds one to
the slot's counter for every slot inside the cache; a counter that was already non-zero is a slot mapped
twice, whichever token came first.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


def _slot_counts(slots_ptr, counts_ptr, out_ptr, num_tokens, num_slots, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    present = i < num_tokens
    slot = tl.load(slots_ptr + i, mask=present, other=-1)
    mapped = present & (slot >= 0)
    inside = mapped & (slot < num_slots)
    before = tl.atomic_add(counts_ptr + tl.where(inside, slot, 0), 1, mask=inside)
    repeated = tl.max((inside & (before > 0)).to(tl.int64), axis=0)
    tl.atomic_add(out_ptr, tl.sum(mapped.to(tl.int64), axis=0))
    tl.atomic_max(out_ptr + 1, tl.max(tl.where(mapped, slot, 0), axis=0))
    tl.atomic_max(out_ptr + 2, repeated)


_compiled = triton.jit(_slot_counts)


def counts(slots: torch.Tensor, num_slots: int, *, interpret: bool = False) -> list[int]:
    """[mapped tokens, largest mapped slot (0 if none), 1 if a slot inside the cache is mapped twice else 0]
    for an int64 slot mapping, with one host transfer."""
    if interpret:
        from triton.runtime.interpreter import InterpretedFunction

        kernel = InterpretedFunction(_slot_counts)
    else:
        kernel = _compiled
    # zeros from a float32 fill (the one kernel every CUDA process has loaded): 0.0 has the bits of 0
    per_slot = torch.zeros(num_slots, dtype=torch.float32, device=slots.device).view(torch.int32)
    out = torch.zeros(6, dtype=torch.float32, device=slots.device).view(torch.int64)
    n = slots.numel()
    if n:
        kernel[(triton.cdiv(n, BLOCK),)](slots, per_slot, out, n, num_slots, BLOCK=BLOCK)
    return out.tolist()
