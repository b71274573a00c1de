"""vLLM's C++ op `torch.ops._C_cache_ops.indexer_k_quant_and_cache` as the producer `vllm-cuda`, registered by
importing `vllm._C`; its last argument is the scale format, a string. It writes row-major only, in the FP8
format its build targets (docs/NUMERICS.md).
"""

from __future__ import annotations

import torch

from ...core.errors import ProducerError
from ...core.producer import Producer
from ...core.spec import Layout
from . import FoundFunction, Unavailable, availability_of, import_module, vllm_version
from .platform import Platform, probe, require_gpu

NAME = "vllm-cuda"
EXTENSION = "vllm._C"
OP = "torch.ops._C_cache_ops.indexer_k_quant_and_cache"


def load() -> FoundFunction:
    version = vllm_version()
    # a compiled extension fails with OSError/ImportError on ABI mismatches
    import_module(EXTENSION, f"vLLM {version} has no compiled extension {EXTENSION} (a CPU-only or source tree?)")
    try:
        op = torch.ops._C_cache_ops.indexer_k_quant_and_cache
    except (AttributeError, RuntimeError):
        raise Unavailable(f"vLLM {version}: {EXTENSION} registers no {OP} (older than DeepSeek-V3.2"
                          " support?)") from None
    return FoundFunction(op, OP, version)


def availability(platform: Platform | None = None) -> tuple[bool, str]:
    return availability_of(load, require_gpu, found=lambda f: f"vLLM {f.version}", platform=platform, probe=probe,
                           ready=lambda f, p: f"vLLM {f.version}: {OP} on {p.arch}")


def make_producer(found: FoundFunction, platform: Platform) -> Producer:
    def check(spec, device) -> None:
        platform.require_device(f"producer {NAME!r}", device)
        if spec.layout is not Layout.LINEAR:
            raise ProducerError(f"producer {NAME!r} writes row-major only: run with --layout linear")
        platform.require_format(f"producer {NAME!r}", spec.fp8)

    def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
        found.fn(k, kv_cache, slot_mapping, quant_block_size, scale_fmt or "")

    return Producer(NAME, f"vLLM {found.version} _C_cache_ops.indexer_k_quant_and_cache on {platform.arch}",
                    writer, check=check)


def producer() -> Producer:
    return make_producer(load(), probe())
