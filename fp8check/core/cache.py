"""Cache buffers: poisoned allocation with guard zones, the scatter of quantized rows to slots, and the
size checks that run before anything large is allocated."""

from __future__ import annotations

import contextlib
import resource
from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import SpecError
from .fp8 import encode_scales
from .spec import CacheSpec

# poison(i) = (i * POISON_STEP + POISON_OFFSET) % 256; linear in i, so it splits into per-block and
# per-byte parts (the diagnosis relies on that to avoid int64 positions for the whole cache), and
# periodic with period 256, so a fill is one period tiled.
POISON_STEP, POISON_OFFSET = 151, 0x5B
POISON_PERIOD = 256
GUARD_ALIGN = POISON_PERIOD  # guards are whole periods: the cache starts at poison phase 0 whatever their size


def guard_bytes(spec: CacheSpec) -> int:
    """Bytes of each guard zone (before and after the cache): at least one whole block, so that an
    off-by-one block (block -1, block num_blocks) or slot (slot num_slots) in either layout lands in
    the guard, never outside the allocation."""
    return -(-max(spec.block_bytes, GUARD_ALIGN) // GUARD_ALIGN) * GUARD_ALIGN


def buffer_bytes(spec: CacheSpec) -> int:
    """Bytes of one poisoned allocation: guard | cache | guard."""
    return 2 * guard_bytes(spec) + spec.num_blocks * spec.block_bytes


def input_bytes(spec: CacheSpec, num_tokens: int) -> int:
    """Memory the inputs of `num_tokens` tokens need while they are made (K with fp32 intermediates, slots)."""
    return num_tokens * (16 * spec.head_dim + 64)


def run_bytes(spec: CacheSpec, num_tokens: int) -> int:
    """Memory a compare of `num_tokens` tokens needs at its peak: two poisoned buffers plus one more
    (the diff's byte mask, or a buffer's copy into or out of shared memory), and the inputs as they are
    made (input_bytes; bench/cases.py measures a compare's real peak). With --layers, a write also holds
    the whole multi-layer buffer, its copy and its change mask (write_in_layer)."""
    layered = 3 * spec.layers * spec.num_blocks * spec.block_bytes if spec.layers > 1 else 0
    return 3 * buffer_bytes(spec) + layered + input_bytes(spec, num_tokens)


def poison_at(position: torch.Tensor) -> torch.Tensor:
    """The poison fill at buffer positions (int64, any shape): position-dependent, so a byte left
    unwritten (or written at the wrong place) is visible, and identical in baseline and candidate."""
    return ((position * POISON_STEP + POISON_OFFSET) % 256).to(torch.uint8)


def _period(start: int, device) -> torch.Tensor:
    return poison_at(torch.arange(start, start + POISON_PERIOD, device=device, dtype=torch.int64))


def fill_poison(out: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Fill the flat uint8 tensor `out` with the poison of buffer positions start, start+1, ...: one period
    tiled (no int64 per byte; a 169 MB cache used to cost 1.3 GB of positions)."""
    period, whole = _period(start, out.device), out.numel() // POISON_PERIOD * POISON_PERIOD
    out[:whole].view(-1, POISON_PERIOD).copy_(period)
    out[whole:].copy_(period[: out.numel() - whole])
    return out


def poison(num_bytes: int, device=None) -> torch.Tensor:
    return fill_poison(torch.empty(num_bytes, dtype=torch.uint8, device=device))


def equals_poison(data: torch.Tensor, start: int = 0) -> bool:
    """Whether the flat uint8 tensor `data`, at buffer positions start.., still holds the poison fill."""
    period, whole = _period(start, data.device), data.numel() // POISON_PERIOD * POISON_PERIOD
    return bool((data[:whole].view(-1, POISON_PERIOD) == period).all()) and torch.equal(
        data[whole:], period[: data.numel() - whole])


@dataclass(frozen=True)
class CacheBuffer:
    """One poisoned allocation: guard | cache | guard. `cache` is the view a producer writes;
    `modified_inputs` names the arguments (`k`, `slot_mapping`) the producer changed in place."""

    spec: CacheSpec
    buffer: torch.Tensor  # uint8 [2 * guard_bytes(spec) + num_blocks * block_bytes]
    modified_inputs: tuple[str, ...] = ()

    @classmethod
    def allocate(cls, spec: CacheSpec, device) -> "CacheBuffer":
        device = torch.device(device or "cpu")
        require_memory(buffer_bytes(spec), device, f"a cache of {spec.summary()}")
        return cls(spec, poison(buffer_bytes(spec), device))

    @property
    def guard_bytes(self) -> int:
        return guard_bytes(self.spec)

    @property
    def flat(self) -> torch.Tensor:
        """uint8 [num_blocks, block_bytes]: one flat byte buffer per block."""
        g, spec = self.guard_bytes, self.spec
        return self.buffer[g : g + spec.num_blocks * spec.block_bytes].view(spec.num_blocks, spec.block_bytes)

    @property
    def cache(self) -> torch.Tensor:
        """uint8 [num_blocks, block_size, head_dim + 4*head_dim/qbs]: the de-facto writer argument."""
        return self.flat.view(self.spec.num_blocks, self.spec.block_size, self.spec.row_bytes)

    @property
    def guards(self) -> torch.Tensor:
        """uint8 [2 * guard_bytes]: the front guard, then the back guard."""
        g = self.guard_bytes
        return torch.cat([self.buffer[:g], self.buffer[-g:]])

    def cache_untouched(self) -> bool:
        """No byte of the cache was written (or every written byte equals the poison under it)."""
        return equals_poison(self.flat.view(-1), self.guard_bytes)

    def guard_writes(self) -> int:
        """Guard bytes that no longer hold the poison: bytes written outside the cache."""
        g, end = self.guard_bytes, self.buffer.numel()
        position = torch.cat([torch.arange(g), torch.arange(end - g, end)]).to(self.buffer.device)
        return int((self.guards != poison_at(position)).sum())

    def faults(self, owner: str) -> tuple[str, ...]:
        """Why the producer `owner` names fails whatever its cache bytes: stray writes (outside the cache)
        and inputs changed in place. One phrase each, for the verdict line; () when there is none."""
        stray = self.guard_writes()
        found = (f"{owner} wrote {stray} bytes outside the cache",) if stray else ()
        if self.modified_inputs:
            found += (f"{owner} modified its {' and '.join(self.modified_inputs)} in place",)
        return found


def scatter_rows(spec: CacheSpec, cache: torch.Tensor, slot_mapping: torch.Tensor, codes: torch.Tensor,
                 scales: torch.Tensor) -> None:
    """Write FP8 codes (uint8 [T, head_dim]) and fp32 scales ([T, head_dim/qbs]) of each token to its
    slot, in the spec's layout and scale format; tokens with a negative slot write nothing."""
    blocks = cache.view(spec.num_blocks, spec.block_bytes)  # a view also of a per-layer strided cache
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].to(torch.int64)
    if slots.numel() and int(slots.max()) >= spec.num_slots:
        raise ValueError(f"slot {int(slots.max())} is outside the cache ({spec.num_slots} slots)")
    block, token = (slots // spec.block_size).view(-1, 1), slots % spec.block_size
    blocks[block, spec.value_index(cache.device)[token]] = codes[keep]
    scale_bytes = encode_scales(scales[keep], spec.scale_fmt)  # [T, groups, 4]
    words = spec.scale_index(cache.device).view(spec.block_size, -1)  # [block_size, groups * 4]
    blocks[block, words[token]] = scale_bytes.reshape(slots.numel(), 4 * spec.groups_per_token)


# ---- per-layer views of one allocation ----------------------------------------------------------------------
def write_in_layer(buffer: CacheBuffer, write) -> None:
    """Call write(cache) with the buffer's cache as the writer sees it: with spec.layers > 1 a strided view,
    layer spec.layer of a poisoned [num_blocks, layers, block_bytes] allocation, copied back afterwards;
    bytes changed in another layer are marked in the guard zones (before: front, after: back)."""
    spec = buffer.spec
    if spec.layers == 1:
        write(buffer.cache)
        return
    layers = poison(spec.num_blocks * spec.layers * spec.block_bytes, buffer.buffer.device)
    layers = layers.view(spec.num_blocks, spec.layers, spec.block_bytes)
    layers[:, spec.layer] = buffer.flat
    before = layers.clone()
    write(layers[:, spec.layer].view(spec.num_blocks, spec.block_size, spec.row_bytes))
    buffer.flat.copy_(layers[:, spec.layer])
    changed = layers != before
    g = buffer.guard_bytes
    for side, part in ((0, changed[:, : spec.layer]), (buffer.buffer.numel() - g, changed[:, spec.layer + 1 :])):
        position = side + torch.arange(min(int(part.sum()), g), device=buffer.buffer.device)
        buffer.buffer[position] = poison_at(position) ^ 0xFF


# ---- padding conventions: -1 (written nowhere) or a dummy slot that may be written (SGLang) ------------------
SKIP_PADDING = -1  # vLLM's and aiter's convention: tokens with slot -1 write nothing


def reserve_pad_slot(spec: CacheSpec, slot_mapping: torch.Tensor, pad_slot: int) -> torch.Tensor:
    """The slot mapping with the dummy slot reserved for padding, as SGLang reserves it: a token that maps to
    it counts as padding (slot -1). The slot must lie in the cache."""
    if pad_slot == SKIP_PADDING:
        return slot_mapping
    if not 0 <= pad_slot < spec.num_slots:
        raise SpecError(f"--pad-slot {pad_slot}: must be -1 or a slot of the cache (0-{spec.num_slots - 1})")
    return torch.where(slot_mapping == pad_slot, torch.full_like(slot_mapping, -1), slot_mapping)


def padded_slots(slot_mapping: torch.Tensor, pad_slot: int) -> torch.Tensor:
    """The slot mapping a writer of the dummy-slot convention is given: padding (slot < 0) sent to pad_slot."""
    if pad_slot == SKIP_PADDING:
        return slot_mapping
    return torch.where(slot_mapping < 0, torch.full_like(slot_mapping, pad_slot), slot_mapping)


OVER_READ_TOKENS = 64  # past the last token: more than a kernel's tokens per program, minus one


def guarded_inputs(spec: CacheSpec, k: torch.Tensor, slot_mapping: torch.Tensor,
                   pad_slot: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of K and the slot mapping whose storage runs OVER_READ_TOKENS tokens past their end: K rows of
    1.0 mapped to the first slot of the cache no token maps (every slot mapped: the first mapped token's).
    A kernel whose mask lets a token past the last one through (`token <= num_tokens`) then writes bytes
    the diff sees, the same on every machine, where it would read whatever memory follows the inputs. One
    scatter, no host synchronisation: it runs before every writer."""
    n, device = slot_mapping.numel(), slot_mapping.device
    taken = torch.zeros(spec.num_slots + 1, dtype=torch.bool, device=device)
    taken[torch.where((slot_mapping >= 0) & (slot_mapping < spec.num_slots), slot_mapping, spec.num_slots)] = True
    if 0 <= pad_slot < spec.num_slots:
        taken[pad_slot] = True  # the dummy slot's bytes are put back to poison: an over-read there would hide
    free = ~taken[:-1]
    mapped = slot_mapping[torch.argmax((slot_mapping >= 0).to(torch.uint8))]
    k_all = torch.ones((n + OVER_READ_TOKENS, *k.shape[1:]), dtype=k.dtype, device=k.device)
    k_all[:n] = k
    slots_all = torch.empty(n + OVER_READ_TOKENS, dtype=slot_mapping.dtype, device=device)
    slots_all[n:] = torch.where(free.any(), torch.argmax(free.to(torch.uint8)), mapped)
    slots_all[:n] = slot_mapping
    return k_all[:n], slots_all[:n]


def forget_slot(buffer: CacheBuffer, slot: int) -> None:
    """Put the poison fill back under one slot's value bytes and scale words: a dummy slot's bytes are the
    writer's own business (whichever padding token wrote last), never compared."""
    spec = buffer.spec
    block, token = divmod(slot, spec.block_size)
    at = torch.cat([spec.value_index(buffer.buffer.device)[token],
                    spec.scale_index(buffer.buffer.device).view(spec.block_size, -1)[token]])
    position = buffer.guard_bytes + block * spec.block_bytes + at
    buffer.buffer[position] = poison_at(position)


# ---- allocation size checks: before anything large is allocated ----------------------------------------
def _proc_bytes(path: str, key: str) -> int | None:
    """The `key: N kB` line of a /proc file, in bytes; None when unknown."""
    try:
        return next(int(line.split()[1]) * 1024 for line in Path(path).read_text().splitlines()
                    if line.startswith(key + ":"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def available_memory(device) -> int | None:
    """Bytes that can still be allocated on `device`; None when unknown (no check is then possible). On the
    CPU the least of MemAvailable, the room under this cgroup's (v2) memory.max and under RLIMIT_AS."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    rooms = [_proc_bytes("/proc/meminfo", "MemAvailable")]
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            rooms.append(int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)  # `ulimit -v`
    if soft != resource.RLIM_INFINITY and (size := _proc_bytes("/proc/self/status", "VmSize")) is not None:
        rooms.append(soft - size)
    rooms = [r for r in rooms if r is not None]
    return max(0, min(rooms)) if rooms else None


def require_memory(needed: int, device, what: str) -> None:
    """One line naming what needs the memory, when it cannot fit: raised before allocating anything."""
    available = available_memory(device)
    if available is not None and needed > available:
        raise SpecError(f"{what} needs {needed:,} bytes, only {available:,} available on {torch.device(device)}")
