"""Inputs of a writer run: seeded bf16 K and a slot mapping, or a replayed safetensors file."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import torch

from .fp8 import decode_table, exp2_int
from .spec import CacheSpec, FP8Format
from .errors import InputError
from .paths import read_regular
from .input_kinds import Distribution, SlotPattern  # noqa: F401  (defined without torch, for the CLI's startup)


@dataclass(frozen=True)
class Inputs:
    k: torch.Tensor  # bf16 [num_tokens, head_dim], contiguous
    slot_mapping: torch.Tensor  # int64 [num_tokens]
    source: str  # how they were made, for reports

    def to(self, device) -> "Inputs":
        return Inputs(self.k.to(device), self.slot_mapping.to(device), self.source)


def make_slot_mapping(spec: CacheSpec, pattern: SlotPattern, generator: torch.Generator) -> torch.Tensor:
    slots = torch.arange(spec.num_slots, dtype=torch.int64)
    if pattern is SlotPattern.PADDED:
        num_pad = max(1, spec.num_slots // 4)
        order = torch.randperm(spec.num_slots + num_pad, generator=generator)
        return torch.cat([slots, torch.full((num_pad,), -1, dtype=torch.int64)])[order]
    if pattern is SlotPattern.SHUFFLED:
        return slots[torch.randperm(spec.num_slots, generator=generator)]
    return slots[slots // spec.block_size % 2 == 0] if pattern is SlotPattern.SPARSE else slots


def make_k(num_tokens: int, head_dim: int, distribution: Distribution, generator: torch.Generator, *,
           quant_block_size: int | None = None, fp8: FP8Format = FP8Format.E4M3FN,
           inf_nan: bool = False) -> torch.Tensor:
    """bf16 K [num_tokens, head_dim]. `quant_block_size` (default head_dim) and `fp8` say where the
    boundary and tie distributions must plant their values; `inf_nan` lets specials (and mixed) add inf/NaN."""
    qbs, n, g = quant_block_size or head_dim, num_tokens, generator
    if distribution is Distribution.HASHED:
        return hashed_k(n, head_dim, int(torch.randint(2**31, (), generator=g)))
    if distribution is Distribution.MIXED:
        kinds = [d for d in Distribution if d not in (Distribution.MIXED, Distribution.HASHED)]
        kind = torch.randint(len(kinds), (n,), generator=g)
        k = torch.empty(n, head_dim, dtype=torch.bfloat16)
        for i, each in enumerate(kinds):  # one call per distribution, not per token
            rows = (kind == i).nonzero().view(-1)
            k[rows] = make_k(rows.numel(), head_dim, each, g, quant_block_size=qbs, fp8=fp8, inf_nan=inf_nan)
        return k
    make = {  # each draws from the generator in the order written
        Distribution.NORMAL: lambda: _row_scales(n, g) * torch.randn(n, head_dim, generator=g),
        Distribution.UNIFORM: lambda: _row_scales(n, g) * (torch.rand(n, head_dim, generator=g) * 2 - 1),
        Distribution.OUTLIERS: lambda: _outliers(n, head_dim, g),
        Distribution.UE8M0_BOUNDARY: lambda: _ue8m0_boundary(n, head_dim, qbs, fp8, g),
        Distribution.TIES: lambda: _ties(n, head_dim, qbs, fp8, g),
        Distribution.TINY: lambda: _tiny(n, head_dim, g),
        Distribution.SPECIALS: lambda: _specials(n, head_dim, g, inf_nan),
    }
    return make[distribution]().to(torch.bfloat16)


def _row_scales(num_tokens: int, generator: torch.Generator) -> torch.Tensor:
    """[num_tokens, 1] magnitudes 2^-3 .. 2^3: rows of different magnitude, so scales vary by token."""
    return torch.exp2(torch.rand(num_tokens, 1, generator=generator) * 6 - 3)


def _random_signs(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return torch.randint(2, shape, generator=generator).float() * 2 - 1


def _plant(groups: torch.Tensor, values: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Put values[i] at a random position of group i (groups fp32 [N, qbs]), in place."""
    column = torch.randint(groups.shape[1], (groups.shape[0], 1), generator=generator)
    return groups.scatter_(1, column, values.view(-1, 1))


def _outliers(num_tokens: int, head_dim: int, generator: torch.Generator) -> torch.Tensor:
    k = torch.randn(num_tokens, head_dim, generator=generator)
    # 1 to 3 elements per row of magnitude 2^6 .. 2^13, against a standard normal rest
    for i in range(3):
        outlier = torch.exp2(torch.randint(6, 13, (num_tokens, 1), generator=generator).float())
        outlier *= (1 + torch.rand(num_tokens, 1, generator=generator)) * _random_signs((num_tokens, 1), generator)
        take = torch.rand(num_tokens, 1, generator=generator) < (1.0 if i == 0 else 0.5)
        column = torch.randint(head_dim, (num_tokens, 1), generator=generator)
        k.scatter_(1, column, torch.where(take, outlier, k.gather(1, column)))
    return k


def _ue8m0_boundary(num_tokens: int, head_dim: int, qbs: int, fp8: FP8Format, generator) -> torch.Tensor:
    groups = num_tokens * (head_dim // qbs)
    # the DIVs real writers use (docs/NUMERICS.md): 448 on e4m3fn; 240 (aiter) and 224 (vLLM) on e4m3fnuz
    divisors = torch.tensor(list(dict.fromkeys([fp8.max, fp8.vllm_divisor])))
    div = divisors[torch.randint(divisors.numel(), (groups,), generator=generator)]
    exponent = torch.randint(-10, 3, (groups,), generator=generator).float()
    amax = (div * torch.exp2(exponent)).to(torch.bfloat16)  # DIV * 2^k: exact in bf16 (<= 4 significant bits)
    # one bf16 ulp below, on, or one above the boundary: the bit pattern of a positive bf16 is monotonic
    step = torch.randint(-1, 2, (groups,), generator=generator).to(torch.int16)
    amax = (amax.view(torch.int16) + step).view(torch.bfloat16).float()
    rest = torch.randn(groups, qbs, generator=generator).clamp(-3, 3) * (amax.view(-1, 1) / 4)
    return _plant(rest, amax * _random_signs((groups,), generator), generator).view(num_tokens, head_dim)


def _ties(num_tokens: int, head_dim: int, qbs: int, fp8: FP8Format, generator) -> torch.Tensor:
    table = torch.tensor(decode_table(fp8))
    finite = torch.unique(table[torch.isfinite(table) & (table >= 0)])  # sorted
    midpoints = (finite[1:] + finite[:-1]) / 2  # 5 significant bits at most: exact in bf16
    groups = num_tokens * (head_dim // qbs)
    # amax = max * 2^j makes s = 2^j exactly with DIV = the format's max (fp32 and ue8m0 scales alike),
    # so x / s = the midpoint exactly
    scale = torch.exp2(torch.randint(-12, 3, (groups, 1), generator=generator).float())
    pick = torch.randint(midpoints.numel(), (groups, qbs), generator=generator)
    values = midpoints[pick] * _random_signs((groups, qbs), generator) * scale
    amax = fp8.max * scale.view(-1) * _random_signs((groups,), generator)
    return _plant(values, amax, generator).view(num_tokens, head_dim)


def _tiny(num_tokens: int, head_dim: int, generator: torch.Generator) -> torch.Tensor:
    kind = torch.randint(4, (num_tokens, 1), generator=generator)
    below_floor = torch.randn(num_tokens, head_dim, generator=generator) * 2.0**-17  # amax ~ 3e-5 < 1e-4
    # bf16 subnormals: integer mantissas times 2^-133, all below fp32's smallest normal 2^-126
    denormal = torch.randint(-127, 128, (num_tokens, head_dim), generator=generator).float() * 2.0**-133
    # a normal row where about half the elements are denormals or signed zeros
    mixed = torch.randn(num_tokens, head_dim, generator=generator)
    swap = torch.rand(num_tokens, head_dim, generator=generator) < 0.5
    mixed = torch.where(swap, denormal * torch.randint(0, 2, (num_tokens, head_dim), generator=generator), mixed)
    k = torch.where(kind == 1, below_floor, torch.where(kind == 2, denormal, mixed))
    return torch.where(kind == 0, torch.zeros_like(k), k)


def _specials(num_tokens: int, head_dim: int, generator: torch.Generator, inf_nan: bool) -> torch.Tensor:
    k = _row_scales(num_tokens, generator) * torch.randn(num_tokens, head_dim, generator=generator)
    zero = torch.rand(num_tokens, head_dim, generator=generator)
    k = torch.where(zero < 0.1, torch.full_like(k, -0.0), torch.where(zero < 0.15, torch.zeros_like(k), k))
    if inf_nan:
        special = torch.tensor([float("inf"), float("-inf"), float("nan")])
        pick = special[torch.randint(3, (num_tokens,), generator=generator)]
        column = torch.randint(head_dim, (num_tokens, 1), generator=generator)
        hit = torch.rand(num_tokens, 1, generator=generator) < 0.25
        k.scatter_(1, column, torch.where(hit, pick.view(-1, 1), k.gather(1, column)))
    return k


# ---- hashed K: the same bytes on every device, generated where the cache lives ---------------------------
# torch's CPU generator cannot be replayed on a GPU (1M tokens: ~1.2 s on the CPU plus a copy). Here element i
# of K is a pure function of (seed, i), integer operations and exact fp32 products, so every device computes
# the same bits, and a GPU 1M tokens in one kernel (hashed_kernel.py):
# - h(x): a 32-bit integer mix (xor-shift, multiply mod 2^32; multipliers below 2^31: no int64 overflow);
# - element (t, d), i = t*head_dim + d: u = the four 16-bit halves of h((2i mod 2^32) ^ key) and
#   h((2i+1 mod 2^32) ^ key) summed, minus their mean: an integer in [-131070, 131070], roughly normal;
# - row scale of token t from h(t ^ key2): 2^e * (8 + m) / 8 with e in [-3, 3], m in [0, 7];
# - k = bf16(u * 2^-15 * scale): u * (8 + m) has at most 22 significant bits, so the fp32 product is
#   exact, and the bf16 rounding (to nearest even) is the same everywhere.

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


def generate(spec: CacheSpec, *, seed: int, slots: SlotPattern = SlotPattern.SEQUENTIAL,
             distribution: Distribution = Distribution.NORMAL, inf_nan: bool = False, device=None) -> Inputs:
    """Deterministic inputs, the same bits on every device, on `device` (default the CPU). Every distribution
    but `hashed` is drawn from torch's CPU generator and copied; `hashed` K is computed on the device itself
    (hashed_k), so a GPU run of millions of tokens does not wait for the CPU to draw them."""
    generator = torch.Generator().manual_seed(seed)
    slot_mapping = make_slot_mapping(spec, slots, generator)
    specials = " with inf/NaN" if inf_nan and distribution in (Distribution.SPECIALS, Distribution.MIXED) else ""
    source = f"{distribution.value} K{specials}, {slots.value} slots, seed {seed}"
    if distribution is Distribution.HASHED:
        k = generate_k(slot_mapping.numel(), spec.head_dim, seed, device or "cpu")
    else:  # the generator's next draws, after the slot mapping's
        k = make_k(slot_mapping.numel(), spec.head_dim, distribution, generator,
                   quant_block_size=spec.quant_block_size, fp8=spec.fp8, inf_nan=inf_nan)
    return Inputs(k, slot_mapping, source).to(device or "cpu")


def load(path: Path) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file, read whole into memory first (paths.read_regular: never mapped from
    the file), with one-line errors for missing, unreadable or foreign files."""
    return load_bytes(read_regular(path), path)


def load_bytes(data: bytes, path: Path) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file's bytes; `path` names it in errors."""
    from safetensors import SafetensorError
    from safetensors.torch import load as load_safetensors

    try:
        return load_safetensors(data)
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise InputError(f"{path}: not a readable safetensors file ({str(exc).splitlines()[0]})") from None


def validate(path: Path, k: torch.Tensor | None, slot_mapping: torch.Tensor | None, spec: CacheSpec | None) -> None:
    """K (and the slot mapping, if any) of the right dtype and shape; with `spec`, fitting it."""
    if k is None:
        raise InputError(f"{path}: has no tensor 'k'")
    if k.dtype != torch.bfloat16 or k.dim() != 2:
        raise InputError(f"{path}: 'k' must be bf16 [num_tokens, head_dim], got {k.dtype} {list(k.shape)}")
    if slot_mapping is not None and (slot_mapping.dtype != torch.int64 or slot_mapping.shape != k.shape[:1]):
        raise InputError(f"{path}: 'slot_mapping' must be int64 [{k.shape[0]}], got {slot_mapping.dtype}"
                         f" {list(slot_mapping.shape)}")
    if spec is not None and k.shape[1] != spec.head_dim:
        raise InputError(f"{path}: 'k' has head_dim {k.shape[1]} but --head-dim is {spec.head_dim}")
    if spec is not None and slot_mapping is not None:
        check_slots(spec, slot_mapping, str(path))


def slot_numbers(slots: torch.Tensor, num_slots: int) -> list[int]:
    """[tokens with a slot >= 0, the largest slot (any value when none), 1 if a slot inside the cache is
    mapped twice else 0]: one pass of counts per slot and one host transfer (it runs before every writer)."""
    if not slots.numel():
        return [0, 0, 0]
    inside = (slots >= 0) & (slots < num_slots)
    bins = torch.where(inside, slots, num_slots)  # every slot outside the cache in one extra bin
    per_slot = torch.zeros(num_slots + 1, dtype=torch.int32, device=slots.device)
    per_slot.index_add_(0, bins, torch.ones_like(bins, dtype=torch.int32))
    return torch.stack([(slots >= 0).sum(), slots.max(), (per_slot[:-1] > 1).any().to(torch.int64)]).tolist()


def check_slots(spec: CacheSpec, slot_mapping: torch.Tensor, where: str) -> None:
    """Refuse a slot mapping that cannot give one verdict: a slot outside the cache (the write would land
    outside the allocation), two tokens in one slot (the bytes would depend on write order), or no token
    with a slot at all (nothing would be written: an empty comparison always "passes")."""
    slots = slot_mapping.view(-1)
    mapped_count, top, any_repeated = slot_numbers(slots, spec.num_slots)
    if not mapped_count:
        raise InputError(f"{where}: nothing to compare: none of its {slots.numel()} tokens has a slot >= 0")
    if top >= spec.num_slots:
        token = int(torch.argmax(slots))
        raise InputError(f"{where}: slot {top} of token {token} is outside the cache ({spec.num_blocks}"
                         f" blocks of {spec.block_size}: slots 0..{spec.num_slots - 1}; raise --num-blocks)")
    if any_repeated:  # name the first repeated slot and the two tokens that map it
        mapped = torch.nonzero(slots >= 0).view(-1)
        ordered, order = torch.sort(slots[mapped], stable=True)
        i = int(torch.nonzero(ordered[1:] == ordered[:-1]).view(-1)[0])
        first, second = int(mapped[order[i]]), int(mapped[order[i + 1]])
        raise InputError(f"{where}: slot {int(ordered[i])} is mapped by tokens {first} and {second}: with two"
                         " tokens in one slot the bytes depend on which write lands last")


def read_inputs(path: Path) -> Inputs:
    """Replay a dumped tensor: `k` (bf16 [T, head_dim]) and optional `slot_mapping` (int64 [T])."""
    tensors = load(path)
    known = ("k", "slot_mapping")
    unknown = sorted(set(tensors) - set(known))
    if unknown:
        hints = [f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name)
                 for name in unknown for close in [difflib.get_close_matches(name, known, n=1)]]
        raise InputError(f"{path}: unknown tensor(s) {', '.join(hints)}; an --input file holds only k and slot_mapping")
    k, slot_mapping = tensors.get("k"), tensors.get("slot_mapping")
    validate(path, k, slot_mapping, None)
    if slot_mapping is None:
        slot_mapping = torch.arange(k.shape[0], dtype=torch.int64)
    return Inputs(k.contiguous(), slot_mapping.contiguous(), f"replayed from {path.name}")


def blocks_needed(inputs: Inputs, block_size: int) -> int:
    top = int(inputs.slot_mapping.max()) if inputs.slot_mapping.numel() else -1
    return max(1, top // block_size + 1)
