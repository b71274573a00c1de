"""STAND-INS for real libraries, for contract tests only: never shipped, never registered as producers.

Each stand-in implements the documented Python API of a real writer (SPEC.md section 1) with the
project's reference numerics, so a test can inject it through sys.modules and check that an adapter
drives that API correctly: same bytes as the reference, same errors as the real package would give.
"""

from __future__ import annotations

import sys
from types import ModuleType

from fp8check.core import reference
from fp8check.core.cache import scatter_rows
from fp8check.core.spec import CacheSpec, FP8Format, Layout, ScaleFormat


def package(name: str, **attrs) -> ModuleType:
    """A module that imports like a package (has __path__), with no files behind it."""
    module = ModuleType(name)
    module.__path__ = []
    module.__file__ = f"<stand-in {name}>"
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def install(monkeypatch, modules: dict[str, ModuleType]) -> None:
    """Put stand-in modules in sys.modules for one test (monkeypatch restores them)."""
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def write_rows(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, profile: reference.Profile,
               fmt: FP8Format, layout: Layout) -> None:
    """What every stand-in writer does: quantize with a reference profile, scatter in one layout."""
    if not isinstance(scale_fmt, str):  # the real ops are compiled: scale_fmt is a C++ std::string
        raise TypeError(f"indexer_k_quant_and_cache(): scale_fmt must be str, got {type(scale_fmt).__name__}")
    scales = ScaleFormat.UE8M0 if scale_fmt == "ue8m0" else ScaleFormat.FP32
    spec = CacheSpec(
        num_blocks=kv_cache.shape[0], block_size=kv_cache.shape[1], head_dim=k.shape[1],
        quant_block_size=quant_block_size, fp8=fmt, scale_fmt=scales, layout=layout,
    )
    codes, scale = reference.quantize(k, profile=profile, fmt=fmt, scale_fmt=scales, quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, slot_mapping, codes, scale)
