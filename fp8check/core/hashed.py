"""Seeded K from a counter-based hash: the same bytes on every device, generated where the cache lives.

`inputs.generate`'s other distributions draw from torch's CPU generator (its stream cannot be
reproduced on a GPU), so 1M tokens cost ~1.2 s on the CPU plus a copy. Here element i of K is a pure
function of (seed, i) made of integer operations and exact fp32 products, so every device computes
the same bits, and a GPU computes 1M tokens in one kernel (hashed_kernel.py):
- h(x): a 32-bit integer mix (xor-shift, multiply mod 2^32; the multipliers are below 2^31 so int64
  products never overflow on the CPU);
- element (t, d), i = t*head_dim + d: u = the four 16-bit halves of h((2i mod 2^32) ^ key) and
  h((2i+1 mod 2^32) ^ key) summed, minus their mean: an integer in [-131070, 131070], roughly normal;
- row scale of token t from h(t ^ key2): 2^e * (8 + m) / 8 with e in [-3, 3], m in [0, 7];
- k = bf16(u * 2^-15 * scale): u * (8 + m) has at most 22 significant bits, so the fp32 product is
  exact, and the bf16 rounding (to nearest even) is the same everywhere.
"""

from __future__ import annotations

import torch

from .fp8 import exp2_int

MASK32 = 0xFFFFFFFF
MIX1, MIX2 = 0x7FEB352D, 0x27D4EB2D  # odd, < 2^31
ELEMENT_KEY, ROW_KEY = 0x9E3779B9, 0x85EBCA6B


def mix(x: torch.Tensor) -> torch.Tensor:
    """The 32-bit mix of int64 values in [0, 2^32), elementwise."""
    x = x ^ (x >> 16)
    x = (x * MIX1) & MASK32
    x = x ^ (x >> 15)
    x = (x * MIX2) & MASK32
    return x ^ (x >> 16)


def keys(seed: int) -> tuple[int, int]:
    """(element key, row key) of a seed: any Python int, reduced to 32 bits."""
    base = mix(torch.tensor([seed & MASK32], dtype=torch.int64))
    element, row = mix(base ^ ELEMENT_KEY), mix(base ^ ROW_KEY)
    return int(element), int(row)


def hashed_k(num_tokens: int, head_dim: int, seed: int, device=None) -> torch.Tensor:
    """bf16 [num_tokens, head_dim] with torch ops (any device; the CPU oracle of the kernel)."""
    element_key, row_key = keys(seed)
    i = torch.arange(num_tokens * head_dim, dtype=torch.int64, device=device)
    # 2i and 2i+1 taken mod 2^32, as the kernel's uint32 arithmetic does (a change only past 2^31 elements)
    h1, h2 = mix(((2 * i) & MASK32) ^ element_key), mix(((2 * i + 1) & MASK32) ^ element_key)
    u = (h1 & 0xFFFF) + (h1 >> 16) + (h2 & 0xFFFF) + (h2 >> 16) - 131070
    r = mix(torch.arange(num_tokens, dtype=torch.int64, device=device) ^ row_key)
    scale = ((8 + (r >> 3) % 8).float() * exp2_int(r % 7 - 6)).view(-1, 1)  # 2^e * (8+m)/8, from the bits
    return (u.view(num_tokens, head_dim).float() * 2.0**-15 * scale).to(torch.bfloat16)


def generate_k(num_tokens: int, head_dim: int, seed: int, device) -> torch.Tensor:
    """The same bytes as hashed_k, by one Triton kernel on a GPU."""
    device = torch.device(device)
    if device.type == "cuda":
        try:
            from .hashed_kernel import launch
        except ImportError:
            return hashed_k(num_tokens, head_dim, seed, device)
        return launch(num_tokens, head_dim, keys(seed), device)
    return hashed_k(num_tokens, head_dim, seed, device)
