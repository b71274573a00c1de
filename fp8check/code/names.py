"""The one grammar of names, and where a named file's bytes come from: the file system, or `git:REV:PATH`
read with `git show` from the repository of the current directory or `--repo DIR`, REV resolved to a commit
first so reports say exactly which bytes ran. Nothing here writes into the user's files or repository.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ..core.errors import InputError, UserError
from ..core.isolation import SECRETS
from ..core.paths import read_regular

GIT_PREFIX = "git:"  # git:REV:PATH, read with `git show`


class Kind(Enum):
    """What a producer's or a file's name stands for: the value is its prefix ("" for a built-in name), `form`
    how a name of this kind is written, for messages."""

    BUILTIN = "", "NAME"  # a registry name: reference, triton, auto, ...
    FILE = "file:", "file:PATH:FUNC"  # a writer or reader in a Python file
    VLLM_FILE = "vllm-file:", "vllm-file:PATH[:FUNC]"  # one function of a vLLM source file, without vLLM
    PKG = "pkg:", "pkg:NAME==VERSION:PATH[:FUNC]"  # one function of a file of a released wheel (released.py)
    PRESET = "preset:", "preset:PROJECT/NAME"  # a writer or reader a project table declares (projects/)
    AITER_SRC = "aiter-src:", "aiter-src:PATH"  # or git:REV:PATH, pkg:amd-aiter==VERSION: aiter's op on the CPU
    VLLM_SRC = "vllm-src:", "vllm-src:PATH"  # an sdist or a tree: vLLM's CUDA op built from source with nvcc
    DEEPGEMM_SRC = "deepgemm-src:", "deepgemm-src:PATH"  # DeepGEMM's paged MQA logits built by its own JIT
    GOLDEN = "golden:", "golden:FILE"  # bytes recorded by `fp8check record`

    def __new__(cls, prefix: str, form: str):
        kind = object.__new__(cls)
        kind._value_, kind.form = prefix, form
        return kind

PKG_PREFIX, PRESET_PREFIX, GOLDEN_PREFIX = Kind.PKG.value, Kind.PRESET.value, Kind.GOLDEN.value  # to build names
CODE_KINDS = (Kind.FILE, Kind.VLLM_FILE, Kind.PKG)  # one function loaded from a file (code/load.py)
SOURCE_KINDS = (Kind.VLLM_SRC, Kind.DEEPGEMM_SRC)  # a project's CUDA source tree, built with nvcc (cuda_src/)


@dataclass(frozen=True)
class Name:
    """A name as the user wrote it, parsed once. `path`: the file text it reads (a path or git:REV:PATH; for
    pkg: the path inside the wheel; for aiter-src: the source's own name); `function`: FUNC or None;
    `package`/`version`: a pkg: name's release (also aiter-src:pkg:)."""

    text: str
    kind: Kind
    body: str  # the text after the prefix
    path: str = ""
    function: str | None = None
    package: str | None = None
    version: str | None = None

    @property
    def untrusted(self) -> bool:
        """Its code comes from outside fp8check: it runs in a child process unless --in-process."""
        return self.kind not in (Kind.BUILTIN, Kind.GOLDEN)

    @property
    def local_path(self) -> Path | None:
        """The file of this machine the name reads (not a git revision, a wheel or a preset), else None."""
        if self.kind in (Kind.FILE, Kind.VLLM_FILE, Kind.GOLDEN, Kind.AITER_SRC, *SOURCE_KINDS) and self.path \
                and not is_git(self.path) and not self.path.startswith(PKG_PREFIX):
            return Path(self.path)
        return None

    def with_path(self, path: str) -> str:
        """The text of a name with a file, the file replaced (a config's relative path made absolute)."""
        return f"{self.kind.value}{path}" + (f":{self.function}" if self.function else "")


def _split_function(body: str) -> tuple[str, str | None]:
    """`[git:REV:]PATH[:FUNC]` -> (PATH text, FUNC or None)."""
    head, sep, tail = body.rpartition(":")
    git_only = body.startswith(GIT_PREFIX) and head.count(":") < 2  # git:REV:PATH, no FUNC
    if sep and head and tail.isidentifier() and not git_only:
        return head, tail
    return body, None


def requirement(name: str, version: str, text: str, error: type[UserError] = UserError) -> tuple[str, str]:
    """(NAME, VERSION) when NAME is a PEP 508 project name and VERSION a PEP 440 version (`0.5.2`,
    `0.1.7.post2.dev18`), so that `NAME==VERSION` is one plain requirement for pip and never an option,
    a file, a URL or a range; `error` naming `text` otherwise."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Requirement(name)
        Version(version)
    except (InvalidRequirement, InvalidVersion):
        parsed = None
    if parsed is None or parsed.name != name or parsed.extras or parsed.url or parsed.marker or \
            version != version.strip() or "==" in version:
        raise error(f"{text!r}: {name}=={version} is not a released package's name and exact version (PEP 508"
                    " name, PEP 440 version)")
    return name, version


def split_pkg(body: str, text: str, error: type[UserError]) -> tuple[str, str, str]:
    """`NAME==VERSION[:REST]` -> (NAME, VERSION, REST); REST may be empty."""
    pin, _, rest = body.partition(":")
    name, eq, version = pin.partition("==")
    if not eq or not name or not version:
        raise error(f"{text!r}: expected pkg:NAME==VERSION:PATH[:FUNC]")
    return (*requirement(name, version, text, error), rest)


def parse(text: str, *, error: type[UserError] = UserError) -> Name:
    """The one parser of names: `text` -> Name; `error` (one line) for a malformed name of a known kind."""
    text = str(text)
    kind = next((k for k in Kind if k.value and text.startswith(k.value)), Kind.BUILTIN)
    body = text[len(kind.value):]
    package, version, rest = split_pkg(body, text, error) if kind is Kind.PKG else (None, None, body)
    if not rest and kind in (*CODE_KINDS, *SOURCE_KINDS):  # no file named (for pkg:, after NAME==VERSION)
        raise error(f"{text!r}: expected {kind.form}")
    if kind in CODE_KINDS:
        return Name(text, kind, body, *_split_function(rest), package, version)
    if kind is Kind.AITER_SRC and body.startswith(PKG_PREFIX):
        package, version, _ = split_pkg(body[len(PKG_PREFIX):], text, error)
        return Name(text, kind, body, body, package=package, version=version)
    if kind in (Kind.GOLDEN, Kind.AITER_SRC, *SOURCE_KINDS):  # golden: with no file is refused where named
        return Name(text, kind, body, body)
    return Name(text, kind, body)  # BUILTIN, PRESET (body: PROJECT/NAME)


def forms(*kinds: Kind) -> str:
    """"file:PATH:FUNC, vllm-file:PATH[:FUNC], ..." for a "known:" message."""
    return ", ".join(k.form for k in kinds)


@dataclass(frozen=True)
class Source:
    """The bytes of a named file and what they are: `provenance` holds file, revision, commit, sha256."""

    data: bytes
    label: str  # as the user wrote it
    provenance: dict


def is_git(text: str) -> bool:
    return text.startswith(GIT_PREFIX)


def split_git(text: str, error: type[UserError] = InputError, *, require_path: bool = True) -> tuple[str, str]:
    """`git:REV:PATH` -> (REV, PATH); PATH may be empty where not `require_path`."""
    rev, sep, path = text[len(GIT_PREFIX):].partition(":")
    if not rev or (require_path and (not sep or not path)):
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


@functools.cache
def _temp_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="fp8check-git-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


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
