"""Triton's own cache key, computed once per Triton installation instead of once per process.

Before its first compile or cached-binary load in a process, compiled Triton computes `triton_key()`:
the sha256 of its frontend, compiler, backends and language sources and of libtriton (hundreds of MB).
On the H200 that is 0.3-0.4 s of every `fp8check compare --device cuda`, more than the diff of a
1M-token cache. The key depends only on those files, so fp8check keeps it in its cache folder
(disk_cache.py) under a signature of every file below them (path, size, mtime, ctime, inode) and of
Triton's version: any change to the installation (an upgrade, an edited source, a rebuilt libtriton)
changes the signature and the key is computed again by Triton's own function. Triton replaces the same
function the same way in its own worker pools. Nothing here runs on the CPU (the interpreter compiles
nothing).
"""

from __future__ import annotations

import functools
import os
import sys

from . import disk_cache

KIND = "triton-key"
MAX_BYTES = 1 << 20


def signature(package_dir: str, version: str) -> str:
    """The cache key of Triton's key: every file Triton hashes lies under these folders or is this file."""
    fields: list = [version, sys.version, package_dir]
    for top in ("compiler", "backends", "language", "_C", os.path.join("runtime", "cache.py")):
        path = os.path.join(package_dir, top)
        if os.path.isfile(path):
            files = [path]
        else:
            files = sorted(os.path.join(d, f) for d, _, names in os.walk(path) if "__pycache__" not in d
                           for f in names)
        for file in files:
            try:
                st = os.stat(file)
            except OSError:
                continue
            fields.append([file, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    return disk_cache.key_of({"triton": fields})


def memoized(package_dir: str, version: str, compute) -> str:
    """`compute()` (Triton's key), read from the cache when this installation's signature is there."""
    return disk_cache.cached_text(KIND, signature(package_dir, version), ".txt", compute,
                                  lambda found: bool(found) and found.startswith(version),  # the key starts so
                                  MAX_BYTES)


def install() -> bool:
    """Replace `triton.runtime.cache.triton_key` with the memoized value, before the first compiled
    launch. False (and nothing changed) where Triton is absent, its key is already computed in this
    process, or its layout is not the one this was written for."""
    try:
        import triton
        from triton.runtime import cache
    except ImportError:
        return False
    original = getattr(cache, "triton_key", None)
    info = getattr(original, "cache_info", None)
    if info is None or info().currsize or getattr(original, "fp8check_memo", False):
        return False
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(cache.__file__)))
    value = memoized(package_dir, triton.__version__, original)
    replacement = functools.lru_cache()(lambda: value)
    replacement.fp8check_memo = True
    cache.triton_key = replacement
    for name in ("triton.runtime.autotuner", "triton.compiler.compiler", "triton.runtime.jit"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "triton_key", None) is original:
            setattr(module, "triton_key", replacement)
    return True
