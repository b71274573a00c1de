"""STAND-IN for vLLM's two indexer K writers (tests only).

- `vllm.v1.attention.ops.rocm_aiter_mla_sparse.indexer_k_quant_and_cache_triton(k, kv_cache,
  slot_mapping, quant_block_size, scale_fmt)` (older trees: `vllm.attention.ops...`): SHUFFLE when
  block_size > 1, row-major when 1;
- `torch.ops._C_cache_ops.indexer_k_quant_and_cache` after `import vllm._C`: row-major only, registered
  here as a real torch op with vLLM's schema (the scale format is a `str`, never None).
Numerics: fp8check.core.reference.VLLM. The FP8 format is fixed per stand-in, as vLLM's is per GPU.
"""

from __future__ import annotations

from types import ModuleType, SimpleNamespace

import torch

from fp8check.core import reference
from fp8check.core.spec import FP8Format, Layout

from . import package, write_rows

VERSION = "0.0.0+standin"
TRITON_MODULE = "vllm.v1.attention.ops.rocm_aiter_mla_sparse"
OLD_TRITON_MODULE = "vllm.attention.ops.rocm_aiter_mla_sparse"
OP_NAMESPACE = "fp8check_standin_c_cache_ops"  # its own namespace: tests swap it in for _C_cache_ops

_cuda_build = {"fp8": FP8Format.E4M3FN}  # the format the stand-in "extension" was built for


def _cuda_op(k, kv_cache, slot_mapping, quant_block_size, kv_cache_dtype):
    write_rows(k, kv_cache, slot_mapping, quant_block_size, kv_cache_dtype, profile=reference.VLLM,
               fmt=_cuda_build["fp8"], layout=Layout.LINEAR)


_LIBRARY = torch.library.Library(OP_NAMESPACE, "DEF")
_LIBRARY.define(
    "indexer_k_quant_and_cache(Tensor k, Tensor(a!) kv_cache, Tensor slot_mapping, int quant_block_size,"
    " str kv_cache_dtype) -> ()"
)
_LIBRARY.impl("indexer_k_quant_and_cache", _cuda_op, "CPU")


def _parents(dotted: str) -> dict[str, ModuleType]:
    parts = dotted.split(".")
    return {".".join(parts[:i]): package(".".join(parts[:i])) for i in range(1, len(parts))}


def triton_modules(*, fp8: FP8Format = FP8Format.E4M3FN, module: str = TRITON_MODULE,
                   with_function: bool = True) -> dict[str, ModuleType]:
    def indexer_k_quant_and_cache_triton(k, kv_cache, slot_mapping, quant_block_size, scale_fmt,
                                         block_tile_size=16, head_tile_size=16):
        layout = Layout.LINEAR if kv_cache.shape[1] == 1 else Layout.SHUFFLE
        write_rows(k, kv_cache, slot_mapping, quant_block_size, scale_fmt or "", profile=reference.VLLM, fmt=fp8,
                   layout=layout)

    found = _parents(module)
    found["vllm"].__version__ = VERSION
    ops = ModuleType(module)
    if with_function:
        ops.indexer_k_quant_and_cache_triton = indexer_k_quant_and_cache_triton
    found[module] = ops
    return found


def cuda_modules(*, fp8: FP8Format = FP8Format.E4M3FN) -> tuple[dict[str, ModuleType], SimpleNamespace]:
    """(sys.modules entries, the namespace to set as torch.ops._C_cache_ops)."""
    _cuda_build["fp8"] = fp8
    found = {"vllm": package("vllm", __version__=VERSION), "vllm._C": ModuleType("vllm._C")}
    namespace = SimpleNamespace(indexer_k_quant_and_cache=getattr(torch.ops, OP_NAMESPACE).indexer_k_quant_and_cache)
    return found, namespace
