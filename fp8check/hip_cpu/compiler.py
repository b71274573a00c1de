"""The clang that builds HIP sources for the CPU: found on PATH or where LLVM packages install it; version
20 or newer (aiter's opus headers need clang 20's `__bf16` and `_BitInt`)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from ..core.errors import UserError

MIN_MAJOR = 20
INSTALL_HINT = ("install clang 20 or newer: `apt-get install clang-22` (Debian bookworm-security, Ubuntu via"
                " apt.llvm.org)")


class CompilerMissing(UserError):
    """No clang >= 20 was found (exit 2, with how to install one)."""


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]  # argv prefix of the C++ driver
    version: str  # "22.1.8"
    description: str  # one line for provenance and doctor

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def binary(self) -> str:
        """The file the command runs, links resolved (its LLVM tools lie next to it)."""
        return os.path.realpath(shutil.which(self.command[0]) or self.command[0])


def _version(command: tuple[str, ...]) -> str | None:
    try:
        out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"clang version (\d+\.\d+\.\d+)", out)
    return match.group(1) if match else None


@lru_cache(maxsize=1)
def find() -> Compiler | None:
    """The newest usable clang found (the first of the newest where several are), or None."""
    names = [f"clang++-{major}" for major in range(30, MIN_MAJOR - 1, -1)] + ["clang++"]
    paths = [path for path in map(shutil.which, names) if path]
    paths += sorted(glob.glob("/usr/lib/llvm-*/bin/clang++"), reverse=True)
    found = [Compiler((path,), version, f"clang {version} ({os.path.basename(path)})") for path in paths
             if (version := _version((path,))) is not None and int(version.split(".")[0]) >= MIN_MAJOR]
    return max(found, key=lambda compiler: compiler.major, default=None)


def require() -> Compiler:
    compiler = find()
    if compiler is None:
        raise CompilerMissing(f"aiter-src needs clang >= {MIN_MAJOR} and none was found; {INSTALL_HINT}")
    return compiler


def status() -> tuple[bool, str]:
    """(found, one line) for `fp8check doctor`."""
    compiler = find()
    return (True, compiler.description) if compiler else (False, f"no clang >= {MIN_MAJOR} found; {INSTALL_HINT}")
