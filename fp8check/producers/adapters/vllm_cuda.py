"""vLLM's C++ op `torch.ops._C_cache_ops.indexer_k_quant_and_cache` as the producer `vllm-cuda`.

Registered by importing `vllm._C` (schema: `(Tensor k, Tensor! kv_cache, Tensor slot_mapping,
int quant_block_size, str kv_cache_dtype)`; the last argument is the scale format, a string). It writes
row-major only, in the FP8 format its build targets (docs/NUMERICS.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import torch

from ...core.errors import ProducerError
from ...core.producer import Producer
from ...core.spec import CacheSpec, Layout
from . import Unavailable, availability_of, first_line, import_vllm
from .platform import Platform, probe, require_gpu

NAME = "vllm-cuda"
EXTENSION = "vllm._C"


@dataclass(frozen=True)
class Found:
    op: Callable[..., None]
    version: str


def load() -> Found:
    _, version = import_vllm()
    try:
        importlib.import_module(EXTENSION)
    except ModuleNotFoundError as exc:
        if exc.name == EXTENSION:
            raise Unavailable(f"vLLM {version} has no compiled extension {EXTENSION} (a CPU-only or source tree?)") from None
        raise Unavailable(f"import {EXTENSION} failed: {first_line(exc)}") from None
    except Exception as exc:  # a compiled extension fails with OSError/ImportError on ABI mismatches
        raise Unavailable(f"import {EXTENSION} failed: {first_line(exc)}") from None
    try:
        op = torch.ops._C_cache_ops.indexer_k_quant_and_cache
    except (AttributeError, RuntimeError):
        raise Unavailable(
            f"vLLM {version}: {EXTENSION} registers no torch.ops._C_cache_ops.indexer_k_quant_and_cache"
            " (older than DeepSeek-V3.2 support?)"
        ) from None
    return Found(op, version)


def availability(platform: Platform | None = None) -> tuple[bool, str]:
    """(ok, one-line reason). Never raises."""
    return availability_of(
        load, require_gpu, found=lambda f: f"vLLM {f.version}",
        ready=lambda f, p: f"vLLM {f.version}: torch.ops._C_cache_ops.indexer_k_quant_and_cache on {p.arch}",
        platform=platform, probe=probe,
    )


@dataclass(frozen=True)
class VllmCudaWriter:
    found: Found
    platform: Platform

    def check(self, spec: CacheSpec, device: torch.device) -> None:
        self.platform.require_device(NAME, device)
        if spec.layout is not Layout.LINEAR:
            raise ProducerError(f"producer {NAME!r} writes row-major only: run with --layout linear")
        self.platform.require_format(NAME, spec.fp8)

    def __call__(self, k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        self.found.op(k, kv_cache, slot_mapping, quant_block_size, scale_fmt or "")


def make_producer(found: Found, platform: Platform) -> Producer:
    writer = VllmCudaWriter(found, platform)
    return Producer(
        NAME, f"vLLM {found.version} _C_cache_ops.indexer_k_quant_and_cache on {platform.arch}", writer,
        check=writer.check,
    )


def producer() -> Producer:
    ok, reason = availability()
    if not ok:
        raise ProducerError(f"producer {NAME!r} is unavailable: {reason}")
    return make_producer(load(), probe())
