"""STAND-IN for ROCm's aiter (tests only). Two API forms, and the unrelated PyPI look-alike.

- newer aiter: `aiter.ops.cache.indexer_k_quant_and_cache(k, kv_cache, slot_mapping, qbs, scale_fmt,
  preshuffle=False)`, writing SHUFFLE itself when preshuffle is true;
- older aiter: the same op without `preshuffle`, writing row-major, plus
  `aiter.ops.shuffle.shuffle_weight(x, layout=(16, 16))`;
- the PyPI package named `aiter` (asynchronous iterator helpers): a package with no `ops`.
Numerics: fp8check.core.reference.AITER. The FP8 format is fixed per stand-in, as the real op's is per GPU.
"""

from __future__ import annotations

from types import ModuleType

import torch

from fp8check.core import reference
from fp8check.core.spec import FP8Format, Layout

from conftest import aiter_shuffle

from . import package, write_rows

VERSION = "0.0.0+standin"


def shuffle_weight(x: torch.Tensor, layout=(16, 16)) -> torch.Tensor:
    """aiter's shuffle for 1-byte elements (conftest.aiter_shuffle), with aiter's preconditions."""
    assert layout == (16, 16), layout
    assert x.element_size() == 1, x.dtype
    rows, cols = x.shape[-2], x.shape[-1]
    assert rows % 16 == 0, f"{rows} % 16 == {rows % 16}"
    assert cols % 32 == 0, f"{cols} % 32 == {cols % 32}"
    return aiter_shuffle(x)


def modules(*, preshuffle: bool, fp8: FP8Format = FP8Format.E4M3FN) -> dict[str, ModuleType]:
    """sys.modules entries of a stand-in aiter of the given API form, writing `fp8`."""

    def write(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, layout):
        write_rows(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, profile=reference.AITER, fmt=fp8,
                   layout=layout)

    if preshuffle:
        def indexer_k_quant_and_cache(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, preshuffle=False):
            write(k, kv_cache, slot_mapping, quant_block_size, scale_fmt,
                  Layout.SHUFFLE if preshuffle else Layout.LINEAR)
    else:
        def indexer_k_quant_and_cache(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
            write(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, Layout.LINEAR)

    cache = ModuleType("aiter.ops.cache")
    cache.indexer_k_quant_and_cache = indexer_k_quant_and_cache
    found = {
        "aiter": package("aiter", __version__=VERSION),
        "aiter.ops": package("aiter.ops"),
        "aiter.ops.cache": cache,
    }
    if not preshuffle:
        shuffle = ModuleType("aiter.ops.shuffle")
        shuffle.shuffle_weight = shuffle_weight
        found["aiter.ops.shuffle"] = shuffle
    return found


def lookalike() -> dict[str, ModuleType]:
    """The PyPI package `aiter` 0.13 (asynchronous iterator helpers): importable, no `ops`."""

    async def map_aiter(fn, aiter):
        async for item in aiter:
            yield fn(item)

    return {"aiter": package("aiter", map_aiter=map_aiter, push_aiter=object)}
