"""ROCm aiter's `indexer_k_quant_and_cache` as the producer `aiter`. Newer releases take a `preshuffle` keyword
and write the SHUFFLE layout themselves; older ones take five arguments and write row-major, and the written
blocks then go through `aiter.ops.shuffle.shuffle_weight`. The description says which form ran.
"""

from __future__ import annotations

import enum
import functools
import importlib
import importlib.metadata
import inspect
from dataclasses import dataclass
from typing import Callable

import torch

from ...core.errors import ProducerError
from ...core.producer import Producer
from ...core.spec import CacheSpec, Layout, default_layout
from . import Unavailable, availability_of, first_line, import_module, installed_version
from .platform import Backend, Platform, probe

NAME = "aiter"
DISTRIBUTION = "amd-aiter"  # ROCm's aiter on PyPI; the PyPI name `aiter` is an unrelated package
SHUFFLE_TILE = (16, 16)  # MFMA 16x16 tiles (docs/NUMERICS.md)


class Form(enum.Enum):
    """How an aiter release produces the SHUFFLE layout."""

    PRESHUFFLE = "preshuffle keyword"
    SHUFFLE_AFTER = "row-major + shuffle_weight"


@dataclass(frozen=True)
class AiterAPI:
    op: Callable[..., None]
    form: Form
    shuffle_weight: Callable[..., torch.Tensor] | None  # only for Form.SHUFFLE_AFTER
    version: str


def _lookalike(module) -> str:
    """Why an importable `aiter` without `aiter.ops` is not ROCm's aiter, naming what it is."""
    where = getattr(module, "__file__", None) or "no file"
    owners = importlib.metadata.packages_distributions().get("aiter", [])
    if DISTRIBUTION in {owner.lower().replace("_", "-") for owner in owners}:
        return f"aiter ({DISTRIBUTION}, {where}) has no aiter.ops: the installation is broken"
    found = f"distribution {', '.join(sorted(owners))}, {where}" if owners else where
    return (f"the installed 'aiter' ({found}) has no aiter.ops: it is the unrelated PyPI package 'aiter'"
            f" (asynchronous iterator helpers), not ROCm's aiter kernel library (pip package {DISTRIBUTION})")


def import_aiter():
    return import_module("aiter", "aiter is not installed (ROCm's kernel library, pip package"
                                  f" {DISTRIBUTION}; needs a ROCm GPU)")


def load_api() -> AiterAPI:
    module = import_aiter()
    version = installed_version(DISTRIBUTION, module)
    try:
        cache = importlib.import_module("aiter.ops.cache")
    except Exception as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "aiter.ops":
            raise Unavailable(_lookalike(module)) from None
        raise Unavailable(f"aiter {version}: import aiter.ops.cache failed: {first_line(exc)}") from None
    op = getattr(cache, "indexer_k_quant_and_cache", None)
    if not callable(op):
        raise Unavailable(f"aiter {version} has no aiter.ops.cache.indexer_k_quant_and_cache (too old for"
                          " DeepSeek-V3.2)")
    try:
        preshuffle = "preshuffle" in inspect.signature(op).parameters
    except (TypeError, ValueError):  # a compiled op without a Python signature: the five-argument form
        preshuffle = False
    if preshuffle:
        return AiterAPI(op, Form.PRESHUFFLE, None, version)
    shuffle_weight = getattr(import_module("aiter.ops.shuffle"), "shuffle_weight", None)
    if not callable(shuffle_weight):
        raise Unavailable(f"aiter {version}: indexer_k_quant_and_cache has no preshuffle keyword and"
                          " aiter.ops.shuffle.shuffle_weight is missing")
    return AiterAPI(op, Form.SHUFFLE_AFTER, shuffle_weight, version)


def require_rocm(platform: Platform) -> None:
    if platform.backend is not Backend.ROCM:
        raise Unavailable(f"it needs a ROCm device, and this torch {torch.__version__} is a"
                          f" {platform.backend.value} build (torch.version.hip is None)")
    if not platform.gpu:
        raise Unavailable("it needs a ROCm device, and torch sees none (torch.cuda.is_available() is False)")


def availability(platform: Platform | None = None) -> tuple[bool, str]:
    return availability_of(load_api, require_rocm, found=lambda api: f"aiter {api.version}", platform=platform,
                           probe=probe, ready=lambda api, p: f"aiter {api.version} ({api.form.value}) on {p.arch}:"
                           f" writes {p.fp8.value} (e4m3fnuz on gfx94x, e4m3fn elsewhere)")


def shuffle_written(write: Callable[[], object], kv_cache: torch.Tensor, slot_mapping: torch.Tensor,
                    head_dim: int, shuffle_weight: Callable, fp8_dtype: torch.dtype) -> None:
    """Run `write` (the five-argument op: row-major) and turn the value regions it wrote into the SHUFFLE
    layout, in place. Only the bytes of written tokens take shuffled values: a token with a negative slot
    writes nothing (docs/NUMERICS.md), and shuffling a whole block would also move the bytes nobody wrote."""
    num_blocks, block_size, _ = kv_cache.shape
    values = kv_cache.view(num_blocks, -1)[:, : block_size * head_dim]
    before = values.clone()
    write()
    written = torch.zeros(num_blocks * block_size, dtype=torch.uint8, device=kv_cache.device)
    written[slot_mapping[slot_mapping >= 0]] = 1
    written = written.view(num_blocks, block_size, 1).expand(num_blocks, block_size, head_dim).contiguous()

    def shuffled(rows: torch.Tensor) -> torch.Tensor:
        # One call for all blocks: shuffle_weight views its input as (-1, N/16, 16, D/32, 2, 16), so a
        # leading block dimension shuffles each [block_size, head_dim] block on its own.
        out = shuffle_weight(rows.view(fp8_dtype), layout=SHUFFLE_TILE)
        return out.contiguous().view(torch.uint8).view(num_blocks, -1)

    rows = values.reshape(num_blocks, block_size, head_dim).contiguous()
    keep = shuffled(written) != 0
    values.copy_(torch.where(keep, shuffled(rows), before))


def make_producer(api: AiterAPI, platform: Platform) -> Producer:
    """The de-facto writer signature around aiter's op, for one platform."""
    def check(spec: CacheSpec, device: torch.device) -> None:
        platform.require_device(f"producer {NAME!r}", device, "the ROCm GPU")
        platform.require_format(f"producer {NAME!r}", spec.fp8)
        if api.form is Form.SHUFFLE_AFTER and spec.layout is Layout.SHUFFLE and spec.head_dim % 32:
            raise ProducerError(f"producer {NAME!r} (aiter {api.version}, {api.form.value}): shuffle_weight with"
                                f" layout (16, 16) needs head_dim % 32 == 0, got {spec.head_dim}")

    def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=None, layout=None):
        shuffle = (layout or default_layout(kv_cache.shape[1]).value) == Layout.SHUFFLE.value
        # the op takes a string; anything but "ue8m0" means fp32 scales
        write = functools.partial(api.op, k, kv_cache, slot_mapping, quant_block_size, scale_fmt or "")
        if api.form is Form.PRESHUFFLE:
            write(preshuffle=shuffle)
        elif shuffle:
            fp8_dtype = fp8_dtype or platform.fp8.torch_dtype()
            shuffle_written(write, kv_cache, slot_mapping, k.shape[-1], api.shuffle_weight, fp8_dtype)
        else:
            write()

    description = f"aiter {api.version} indexer_k_quant_and_cache ({api.form.value}) on {platform.arch}"
    return Producer(NAME, description, writer, check=check, keywords=frozenset({"fp8_dtype", "layout"}))


def producer() -> Producer:
    return make_producer(load_api(), probe())
