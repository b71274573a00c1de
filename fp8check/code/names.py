"""Where a named file's bytes come from: the file system, or `git:REV:PATH` read with `git show`.

Every file the user names (a writer's source, `--input`, a golden file) may be given as
`git:REV:PATH`: PATH as `git show REV:PATH` takes it (relative to the repository root), read from the
repository holding the current directory or `--repo DIR`, REV resolved to a commit hash first so the
reports can say exactly which bytes ran. Nothing here writes into the user's files or repository.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError, UserError
from ..core.isolation import SECRETS
from ..core.paths import read_regular

GIT_PREFIX = "git:"  # git:REV:PATH, read with `git show`
FILE_PREFIX = "file:"  # file:PATH:FUNC, a writer or reader in a Python file
VLLM_FILE_PREFIX = "vllm-file:"  # vllm-file:PATH[:FUNC], one function of a vLLM source file, without vLLM
GOLDEN_PREFIX = "golden:"  # golden:FILE, bytes recorded by `fp8check record`
PKG_PREFIX = "pkg:"  # pkg:NAME==VERSION:PATH[:FUNC], one function of a file of a released wheel (released.py)
PRESET_PREFIX = "preset:"  # preset:PROJECT/NAME, a writer or reader a project table declares (projects/)
AITER_SRC_PREFIX = "aiter-src:"  # aiter-src:PATH, aiter's C++ op built from an aiter source for the CPU (writers/aiter_cpu/)


@dataclass(frozen=True)
class Source:
    """The bytes of a named file and what they are: `provenance` holds file, revision, commit, sha256."""

    data: bytes
    label: str  # as the user wrote it
    provenance: dict

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


def is_git(text: str) -> bool:
    return text.startswith(GIT_PREFIX)


def split_git(text: str, error: type[UserError] = InputError) -> tuple[str, str]:
    """`git:REV:PATH` -> (REV, PATH)."""
    rev, sep, path = text[len(GIT_PREFIX):].partition(":")
    if not sep or not rev or not path:
        raise error(f"{text!r}: expected git:REV:PATH")
    return rev, path


def _git(repo: Path, args: list[str], what: str, error: type[UserError]) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False,
                              env={k: v for k, v in os.environ.items() if k not in SECRETS})
    except FileNotFoundError:
        raise error(f"{what}: git is not installed") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise error(f"{what}: git {' '.join(args)} failed in {repo}: {message[-1] if message else done.returncode}")
    return done.stdout


def read_source(text: str, repo: Path | None = None, *, error: type[UserError] = InputError) -> Source:
    """The bytes of `text` (a path or `git:REV:PATH`) and their provenance; one-line `error` otherwise."""
    if not is_git(text):
        data = read_regular(text, error=error)
        return Source(data, text, {"file": text, "sha256": hashlib.sha256(data).hexdigest()})
    rev, path_text = split_git(text, error)
    where = Path(repo) if repo is not None else Path.cwd()
    if not where.is_dir():
        raise error(f"{text}: --repo {where} is not a folder")
    top = _git(where, ["rev-parse", "--show-toplevel"], text, error).decode().strip()
    try:
        commit = _git(where, ["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], text, error).decode().strip()
    except UserError:
        raise error(f"{text}: no commit {rev!r} in the git repository {top}") from None
    data = _git(where, ["show", f"{commit}:{path_text}"], text, error)
    provenance = {"file": path_text, "revision": rev, "commit": commit, "repository": top,
                  "sha256": hashlib.sha256(data).hexdigest()}
    return Source(data, text, provenance)


_TEMP: dict[str, Path] = {}


def _temp_dir() -> Path:
    if "dir" not in _TEMP:
        _TEMP["dir"] = Path(tempfile.mkdtemp(prefix="fp8check-git-"))
        atexit.register(shutil.rmtree, _TEMP["dir"], True)
    return _TEMP["dir"]


def materialize(path: Path | str, repo: Path | None = None, *, error: type[UserError] = InputError) -> tuple[Path, dict]:
    """A readable file for `path`: itself, or `git:REV:PATH` written to a private temporary file (removed at
    exit) named like the original, so messages name the file the user meant. Returns (file, provenance)."""
    text = str(path)
    if not is_git(text):
        return Path(text), {}
    source = read_source(text, repo, error=error)
    folder = _temp_dir() / source.provenance["commit"][:12]
    folder.mkdir(exist_ok=True)
    target = folder / Path(source.provenance["file"]).name
    target.write_bytes(source.data)
    return target, source.provenance
