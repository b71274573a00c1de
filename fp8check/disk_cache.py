"""Where fp8check keeps files that make the next run faster (never anything a verdict relies on unchecked).

The folder is `$FP8CHECK_CACHE_DIR`, else `$XDG_CACHE_HOME/fp8check`, else `~/.cache/fp8check`;
`FP8CHECK_CACHE_DIR=` (set and empty) turns every cache off. Entries are written to a temporary file
and renamed into place, so a reader sees a whole file or none; a folder that cannot be written is the
same as no cache (the run computes what it needs, as without one). Each kind of entry has its own
sub-folder and size budget; the oldest entries (by last use) go first.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
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


def entry(kind: str, key: str, suffix: str = "") -> Path | None:
    folder = root()
    return None if folder is None else folder / kind / f"{key}{suffix}"


def touch(path: Path) -> None:
    """Mark an entry as just used (eviction removes the least recently used first)."""
    try:
        os.utime(path)
    except OSError:
        pass


def write(path: Path, fill) -> bool:
    """Write an entry atomically: `fill(file)` writes the bytes to an open binary file. False when the
    folder cannot be written (the caller goes on without the cache)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
        with os.fdopen(fd, "wb") as out:
            fill(out)
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


def evict(folder: Path, max_bytes: int, keep: Path | None = None) -> None:
    """Delete the least recently used entries of `folder` until it holds at most `max_bytes` (never `keep`)."""
    try:
        entries = [(st.st_mtime_ns, st.st_size, p) for p in folder.iterdir()
                   if not p.name.startswith(".tmp-") for st in [p.stat()] if p.is_file()]
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= max_bytes:
            break
        if path == keep:
            continue
        try:
            path.unlink()
            total -= size
        except OSError:
            pass


def files_digest(paths) -> str | None:
    """sha256 of the files' bytes one after another (code a cached value depends on); None when one of
    them cannot be read (the caller then keeps nothing)."""
    digest = hashlib.sha256()
    try:
        for path in paths:
            digest.update(Path(path).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def cached_text(kind: str, key: str, suffix: str, compute, valid, max_bytes: int) -> str | None:
    """An entry's text that `valid(text)` accepts, else `compute()` (a str to keep, or None: nothing kept)."""
    path = entry(kind, key, suffix)
    if path is not None:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            text = None
        if text is not None and valid(text):
            touch(path)
            return text
    text = compute()
    if text is not None and path is not None and write(path, lambda out: out.write(text.encode())):
        evict(path.parent, max_bytes, keep=path)
    return text


def remembered(kind: str, fields: dict, check, max_bytes: int = 1 << 20) -> bool:
    """`check()` (a bool), where a True is kept: an entry named by the sha256 of `fields` whose content is
    those fields' JSON. Only successes are kept, so a failed check always runs again; an entry that does
    not hold exactly its fields (damaged, or a hash collision) is not believed."""
    text = json.dumps(fields, sort_keys=True)
    kept = cached_text(kind, key_of(fields), ".json", lambda: text if check() else None,
                       lambda found: found == text, max_bytes)
    return kept is not None
