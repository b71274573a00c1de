"""`pkg:NAME==VERSION:PATH[:FUNC]`: one file of a project's released wheel, fetched, hashed, extracted
(docs/ECOSYSTEM.md; the hash rule: docs/SECURITY.md).

pip itself downloads the wheel without its dependencies into fp8check's cache folder. Names and versions must
follow PEP 508 / PEP 440 before pip sees them, and nothing typed reaches pip as an option. Only PATH is read
out of the wheel: nothing is installed, nothing of the package is imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core import disk_cache
from ..core.errors import ProducerError
from .names import Source, requirement


@dataclass(frozen=True)
class Package:
    """A released version of a package, and where pip may look for it (None: pip's own configuration)."""

    name: str
    version: str
    sha256: str | None = None  # the wheel's pinned hash; None: unpinned (admit), recorded, not checked
    wheel: str | None = None  # the pinned wheel's file name (its tags pick the platform to download for)
    find_links: str | None = None  # a folder of wheels (`pip download --no-index --find-links DIR`)

    @property
    def label(self) -> str:
        return f"{self.name}=={self.version}"


def admit(package: Package, *, allow_unpinned: bool, what: str) -> None:
    """The hash rule, before anything is fetched: a release without a pinned sha256 runs only when the run
    allows it (`--allow-unpinned`); its hash is then recorded and printed, never checked."""
    if package.sha256 is None and not allow_unpinned:
        raise ProducerError(f"{what}: no project table pins the sha256 of {package.label}; fp8check runs released"
                            " code unpinned only with --allow-unpinned (config: allow_unpinned = true), and then"
                            " records and prints its wheel's sha256")


def _normal(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _wheels(folder: Path, package: Package) -> list[Path]:
    prefix = f"{_normal(package.name)}-{package.version}-"
    return sorted(p for p in folder.glob("*.whl") if _normal(p.name).startswith(_normal(prefix)))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _python_version(interpreter: str, abi: str, running: tuple[int, int]) -> str | None:
    """The Python version pip should select for: a `cpXY` wheel is for X.Y only; a stable-ABI one (`abi3`)
    for X.Y and every later CPython, so the running interpreter's version when it is one of those (pip then
    also checks the wheel's Requires-Python against it: vLLM's cp38-abi3 wheel requires >= 3.10)."""
    if not (interpreter.startswith("cp") and interpreter[2:].isdigit()):
        return None
    digits = interpreter[2:]
    tagged = (int(digits[0]), int(digits[1:] or 0))
    chosen = max(tagged, running) if abi == "abi3" else tagged
    return f"{chosen[0]}.{chosen[1]}"


def _platform_args(wheel: str | None, running: tuple[int, int] = sys.version_info[:2]) -> list[str]:
    """pip's target options for a pinned binary wheel, from its tags (e.g. a cp311 manylinux wheel fetched by
    Python 3.12, or a cp38-abi3 one by Python 3.11)."""
    if wheel is None:
        return []
    from packaging.utils import parse_wheel_filename

    tags = sorted(parse_wheel_filename(wheel)[3], key=str)
    if all(tag.platform == "any" for tag in tags):
        return []
    tag = tags[0]
    args = ["--only-binary=:all:", *(f"--platform={p}" for p in sorted({t.platform for t in tags})), f"--abi={tag.abi}"]
    version = _python_version(tag.interpreter, tag.abi, running)
    if version is not None:
        args += ["--implementation=cp", f"--python-version={version}"]
    return args


def _download(package: Package, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    requirement(package.name, package.version, f"pkg:{package.label}", ProducerError)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
               f"--dest={folder}", *_platform_args(package.wheel)]
    if package.find_links is not None:
        command += ["--no-index", f"--find-links={package.find_links}"]
    command += ["--", package.label]  # after `--`: a requirement, whatever it held
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.startswith("ERROR")] or \
            done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise ProducerError(f"pkg:{package.label}: pip download failed: {lines[-1]}")


def fetch_wheel(package: Package) -> tuple[Path, str]:
    """(wheel file, its sha256): from the cache folder, else downloaded into it; a pinned hash must match."""
    folder = disk_cache.entry("wheels", f"{_normal(package.name)}-{package.version}") or \
        Path(tempfile.mkdtemp(prefix="fp8check-wheel-"))
    found = _wheels(folder, package) if folder.is_dir() else []
    if package.wheel is not None:
        found = [p for p in found if p.name == package.wheel]
    if not found:
        _download(package, folder)
        found = _wheels(folder, package)
        if package.wheel is not None:
            found = [p for p in found if p.name == package.wheel] or found
    if not found:
        raise ProducerError(f"pkg:{package.label}: pip downloaded no wheel of {package.label} into {folder}")
    wheel = found[0]
    digest = _sha256(wheel)
    if package.sha256 is not None and digest != package.sha256:
        raise ProducerError(f"pkg:{package.label}: {wheel.name} has sha256 {digest}, the pinned hash is"
                            f" {package.sha256}: refused")
    return wheel, digest


def unpacked_once(kind: str, key: str, done: str, extract: Callable[[Path], Path]) -> Path:
    """A folder holding `done`, unpacked once per `key` into the cache folder (a private temporary folder
    without one): `extract(staging)` fills a fresh folder and returns the part to keep, moved into place in
    one step, so that no process sees a half-unpacked copy. It stages beside the entry: a rename across
    file systems (a temporary folder elsewhere) fails."""
    target = disk_cache.entry(kind, key)
    if target is not None and (target / done).exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=None if target is None else target.parent))
    unpacked = extract(staging)
    if target is None:
        return unpacked
    with contextlib.suppress(OSError):  # unpacked by another process first
        os.replace(unpacked, target)
    shutil.rmtree(staging, ignore_errors=True)
    return target


def read_file(package: Package, path: str) -> Source:
    """PATH from the released wheel, with its provenance (package, wheel, both hashes)."""
    wheel, wheel_sha = fetch_wheel(package)
    try:
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(path)
    except KeyError:
        raise ProducerError(f"pkg:{package.label}: {wheel.name} holds no file {path}") from None
    except zipfile.BadZipFile:
        raise ProducerError(f"pkg:{package.label}: {wheel.name} is not a zip archive") from None
    provenance = {"file": path, "package": package.label, "wheel": wheel.name, "wheel_sha256": wheel_sha,
                  "sha256": hashlib.sha256(data).hexdigest(), "wheel_pinned": "yes" if package.sha256 else "no"}
    return Source(data, f"pkg:{package.label}:{path}", provenance)
