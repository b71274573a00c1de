"""Reading a file the user named: only a regular file, read whole into memory before anything runs, so that
a file rewritten meanwhile (a concurrent `cp`) changes nothing. A FIFO or a device is refused from its `stat`,
never opened: opening a FIFO for reading waits for a writer; reading a device may never end."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import InputError, UserError


KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a device"),
         (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    return next((kind for test, kind in KINDS if test(mode)), "not a regular file")


def read_regular(path: Path | str, *, error: type[UserError] = InputError, what: str = "") -> bytes:
    """The whole content of the regular file `path` (symbolic links followed); one-line `error` otherwise.
    `what` prefixes the message (e.g. "--input")."""
    label = f"{what} {path}" if what else str(path)
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode):  # O_NONBLOCK: had it become a FIFO since the stat, the open would not wait
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb", buffering=0) as file:
                mode = os.fstat(fd).st_mode
                if stat.S_ISREG(mode):
                    return file.readall()  # one allocation of the file's size: inputs can be hundreds of MB
    except FileNotFoundError:
        raise error(f"{label}: no such file") from None
    except OSError as exc:
        raise error(f"{label}: cannot be read ({exc.strerror})") from None
    raise error(f"{label}: is {kind_of(mode)}, not a regular file")
