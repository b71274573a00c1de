"""Writing the files a run produces (--out, --json, --junit, --markdown; docs/SECURITY.md "Report files"):
whole, through a short temporary name in the target's folder moved over it in one step (os.replace), so a
reader never sees half a report and a legal 255-byte target name still works."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from .errors import UsageError
from .paths import kind_of, read_regular

TEMPORARY_PREFIX = ".fp8check-"


def check_output(path: Path, *, option: str, reading: Iterable[Path | str] = ()) -> None:
    """Only a regular file or a new name in an existing folder, and none of the files in `reading` (the
    files this run reads: inputs, golden files, configs, writers' sources)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise UsageError(f"{option} {path}: folder {path.parent} does not exist") from None
        return
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot be inspected ({exc.strerror})") from None
    if stat.S_ISLNK(mode):
        raise UsageError(f"{option} {path}: is a symbolic link; give the real file or a new path")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{option} {path}: is {kind_of(mode)}; give a regular file or a new path")
    for read in reading:
        with contextlib.suppress(OSError, ValueError):
            if os.path.samefile(path, read):
                raise UsageError(f"{option} {path}: is a file this run reads ({read}); give another path")


def replace_atomically(path: Path, write: Callable[[Path], None], *, option: str) -> None:
    """Call `write(temporary)` for a new file beside `path`, then move it over `path` in one step; the
    temporary file is removed whatever happens. Its mode is what a plain open() would have given."""
    try:
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=TEMPORARY_PREFIX, suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write in {path.parent} ({exc.strerror})") from None
    os.close(handle)
    temporary = Path(name)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # not mkstemp's 0600
        write(temporary)
        os.replace(temporary, path)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write ({exc.strerror})") from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def write_output(path: Path, text: str, *, reading: Iterable[Path | str] = (), option: str = "--json",
                 append: bool = False) -> None:
    """Check `path` (check_output), then write `text` to it whole; `append` keeps what it held before."""
    check_output(path, option=option, reading=tuple(reading))
    before = read_regular(path, error=UsageError, what=option) if append and path.exists() else b""
    replace_atomically(path, lambda temporary: temporary.write_bytes(before + text.encode("utf-8")), option=option)
