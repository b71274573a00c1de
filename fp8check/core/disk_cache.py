"""fp8check's cache folder (docs/install.md "The cache folder"): files fetched or built once and checked when
used (never a verdict). Entries are renamed into place from a temporary file: a reader sees all or nothing."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

ENV = "FP8CHECK_CACHE_DIR"


def root() -> Path | None:
    """The cache folder, or None when caching is off."""
    configured = os.environ.get(ENV)
    if configured is not None:
        return Path(configured).expanduser() if configured.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fp8check"


def key_of(fields: dict) -> str:
    """A file name for a dict of JSON-able fields: the sha256 of their canonical JSON."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def entry(kind: str, key: str) -> Path | None:
    """Where the entry `key` of `kind` lives, its folder made; None when caching is off or the folder cannot
    be made or written (a regular file where the cache folder should be, no permission): the same as no
    cache, never an error."""
    folder = root()
    if folder is None:
        return None
    with contextlib.suppress(OSError):
        (folder / kind).mkdir(parents=True, exist_ok=True)
        if os.access(folder / kind, os.W_OK | os.X_OK):
            return folder / kind / key
    return None
