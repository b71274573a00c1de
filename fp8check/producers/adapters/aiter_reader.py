"""ROCm aiter's paged MQA logits kernel `deepgemm_fp8_paged_mqa_logits` as the reader `aiter`, called as vLLM
calls it (docs/parity.md). It fills a caller-made output buffer; with `Preshuffle` it reads the SHUFFLE layout,
so on a cache written LINEAR it reads the wrong bytes (which `fp8check parity` reports as a reader fault).
"""

from __future__ import annotations

from ...core.producer import Reader
from . import FoundFunction, availability_of, find_function, installed_version
from .aiter import DISTRIBUTION, import_aiter, require_rocm
from .platform import Platform, probe

NAME = "aiter"
MODULES = ("aiter.ops.triton.pa_mqa_logits", "aiter.ops.triton.attention.pa_mqa_logits")
CHUNK_K = 256  # vLLM's call (rocm_aiter_mla_sparse.py)
WAVE_PER_EU = 2


def load() -> FoundFunction:
    version = installed_version(DISTRIBUTION, import_aiter())
    return find_function(MODULES, "deepgemm_fp8_paged_mqa_logits", "aiter", version)


def availability(platform: Platform | None = None) -> tuple[bool, str]:
    return availability_of(
        load, require_rocm, found=lambda f: f"aiter {f.version}", platform=platform, probe=probe,
        ready=lambda f, p: f"aiter {f.version}: {f.where} on {p.arch} (reads {p.fp8.value})")


def make_reader(found: FoundFunction, platform: Platform) -> Reader:
    """vLLM's reader signature around aiter's kernel, called the way vLLM calls it."""
    def check(spec, device) -> None:
        platform.require_device(f"reader {NAME!r}", device, "the ROCm GPU")
        platform.require_format(f"reader {NAME!r}", spec.fp8, "reads")

    def read(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len, *, out):
        """`out`: the caller-made float32 [B*next_n, max_model_len] buffer, masked -inf (obligations.GuardedOutput)."""
        block_size = kv_cache.shape[1]
        found.fn(q_fp8, kv_cache, weights, out, context_lens, block_tables, max_model_len,
                 Preshuffle=block_size > 1, KVBlockSize=block_size, ChunkK=CHUNK_K, WavePerEU=WAVE_PER_EU)
        return out

    return Reader(NAME, f"aiter {found.version} {found.where} on {platform.arch}", read, check=check,
                  provenance={"function": found.where, "version": found.version}, fills_output=True)


def reader(spec) -> Reader:
    return make_reader(load(), probe())
