"""vLLM's Triton writer `indexer_k_quant_and_cache_triton` (vLLM's ROCm sparse-MLA ops module) as the producer
`vllm-triton`. vLLM chooses its FP8 format from the GPU and its layout from the block size (docs/NUMERICS.md).
"""

from __future__ import annotations

from ...core.errors import ProducerError
from ...core.producer import Producer
from ...core.spec import default_layout
from . import FoundFunction, availability_of, find_function, vllm_version
from .platform import Platform, probe, require_gpu

NAME = "vllm-triton"
MODULES = ("vllm.v1.attention.ops.rocm_aiter_mla_sparse", "vllm.attention.ops.rocm_aiter_mla_sparse")


def load() -> FoundFunction:
    return find_function(MODULES, "indexer_k_quant_and_cache_triton", "vLLM", vllm_version())


def availability(platform: Platform | None = None) -> tuple[bool, str]:
    return availability_of(load, require_gpu, found=lambda f: f"vLLM {f.version}", platform=platform, probe=probe,
                           ready=lambda f, p: f"vLLM {f.version}: {f.where} on {p.arch} ({p.fp8.value})")


def make_producer(found: FoundFunction, platform: Platform) -> Producer:
    def check(spec, device) -> None:
        platform.require_device(f"producer {NAME!r}", device)
        platform.require_format(f"producer {NAME!r}: vLLM", spec.fp8)
        expected = default_layout(spec.block_size)
        if spec.layout is not expected:
            raise ProducerError(f"producer {NAME!r}: vLLM writes the {expected.value} layout for block_size"
                                f" {spec.block_size}, not {spec.layout.value}: leave --layout at its default")

    return Producer(NAME, f"vLLM {found.version} {found.where} on {platform.arch}", found.fn, check=check)


def producer() -> Producer:
    return make_producer(load(), probe())
