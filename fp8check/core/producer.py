"""What a loaded writer (`Producer`) or reader (`Reader`) is, and what running a writer produced (`Side`,
also a golden file's recorded bytes). A writer is `fn(k, kv_cache, slot_mapping, quant_block_size,
scale_fmt)` writing the uint8 cache `[num_blocks, block_size, head_dim + 4*head_dim/qbs]` in place."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import torch

from .errors import one_line
from .cache import CacheBuffer
from .isolation import Limits
from .spec import CacheSpec

Writer = Callable[..., None]
Check = Callable[[CacheSpec, torch.device], None]
EXTRA_KEYWORDS = ("fp8_dtype", "layout")  # optional keywords a writer may accept
DEFAULT_WRITER = "indexer_k_quant_and_cache_triton"  # the function `vllm-file:PATH` names without `:FUNC`


def no_check(spec: CacheSpec, device: torch.device) -> None:
    """The check of a writer (or reader) that can run any spec on any device."""


@dataclass(frozen=True)
class Producer:
    name: str
    description: str
    writer: Writer
    emulated: bool = False  # a PyTorch emulation of a writer that is not itself running
    check: Check = no_check  # raises ProducerError when this spec cannot run on this device
    keywords: frozenset[str] = frozenset()  # the subset of EXTRA_KEYWORDS the writer accepts
    provenance: dict = field(default_factory=dict)  # file, function, revision, sha256 of code from files
    triton: bool = False  # runs Triton kernels: on the CPU in the exact interpreter (interpreter.compiled_caveat)
    # Run in a child process under these limits (code from files); None: in this process. An isolated
    # Producer holds no code: the child loads it by `name` (git names read from `repo`).
    isolation: Limits | None = None
    repo: str | None = None
    interpreter: str = "grid"  # its Triton grids on the CPU: "grid" (at once where exact) or "sequential"


ReaderFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class Reader:
    name: str
    description: str
    fn: ReaderFn
    exact: bool = False  # fp8check's own float64 reader: on the baseline's bytes it IS the truth
    check: Check = no_check  # raises ProducerError when this spec cannot be read on this device
    provenance: dict = field(default_factory=dict)  # file, function, revision, commit, sha256, bound names
    isolation: Limits | None = None  # as Producer.isolation (readers from files)
    repo: str | None = None
    spec: CacheSpec | None = None  # what an isolated reader's child loads it for (the FP8 format its names bind to)
    # fn fills a caller-made output buffer (keyword-only `out`, float32 [B*next_n, max_model_len], masked -inf)
    # instead of returning logits; it gets one with poisoned guard rows and columns (readers/obligations.py)
    fills_output: bool = False


@dataclass(frozen=True)
class Side:
    """One producer's run: its name, whether it is an emulation, and the cache it wrote."""

    name: str
    description: str
    emulated: bool
    buffer: CacheBuffer
    provenance: dict = field(default_factory=dict)  # what ran: file, function, revision, commit, sha256, bound
    triton: bool = False  # ran Triton kernels (on the CPU: in the exact interpreter)


def reported_provenance(reported) -> dict:
    """What a child said its code was, kept to the shape provenance has: strings, and one level of
    name -> string mappings (vllm-file's bound names), each one printable line of at most 1000 characters."""
    if not isinstance(reported, dict):
        return {}
    text = functools.partial(one_line, limit=1000)  # no line breaks or terminal escapes from a child into a report
    return {text(key): ({text(k): text(v) for k, v in value.items()} if isinstance(value, dict) else text(value))
            for key, value in reported.items()}
