"""Producers and readers around real libraries that may or may not be installed (aiter, vLLM).

Each adapter offers `availability() -> (ok, reason)`, which never raises and imports the library only
when called, and `producer()` / `reader(spec)`, which the registry calls only once it is ok.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Callable, TypeVar

from ...core.errors import first_line

T = TypeVar("T")


class Unavailable(Exception):
    """A real writer that cannot be used here; the message is one line saying why."""


def import_module(name: str, missing: str | None = None):
    """The module, or Unavailable: `missing` when the module (or a package above it) is not there, else why
    its import failed (a broken install raises anything from its own import code: keep it)."""
    try:
        return importlib.import_module(name)
    except Exception as exc:
        if missing is not None and isinstance(exc, ModuleNotFoundError) and exc.name is not None and (
                name == exc.name or name.startswith(exc.name + ".")):
            raise Unavailable(missing) from None
        raise Unavailable(f"import {name} failed: {first_line(exc)}") from None


def installed_version(distribution: str, module) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(module, "__version__", "unknown version"))


def vllm_version() -> str:
    """The installed vLLM's version, or Unavailable saying why vllm cannot be imported."""
    return installed_version("vllm", import_module("vllm", "vLLM is not installed"))


@dataclass(frozen=True)
class FoundFunction:
    fn: Callable[..., None]
    where: str  # module.function
    version: str


def find_function(modules, function: str, library: str, version: str) -> FoundFunction:
    """The first of `modules` (names, in order) with a callable `function`, or Unavailable listing why
    each one was not it: a missing module (the candidate, or a package above it), an import that failed
    in the library's own code, a module without the function."""
    problems = []
    for name in modules:
        try:
            module = import_module(name, f"no {name}")
        except Unavailable as exc:
            problems.append(str(exc))
            continue
        fn = getattr(module, function, None)
        if callable(fn):
            return FoundFunction(fn, f"{name}.{function}", version)
        problems.append(f"{name} has no {function}")
    raise Unavailable(f"{library} {version} has no usable {function}: {'; '.join(problems)}")


def availability_of(load: Callable[[], T], require: Callable, *, found: Callable[[T], str],
                    ready: Callable, platform, probe: Callable) -> tuple[bool, str]:
    """(ok, one-line reason) of a real writer: can it be imported (`load`), can it run on `platform`
    (or, when None, what `probe()` finds) (`require`)? `found(x)` names what was imported,
    `ready(x, platform)` says what will run. Never raises."""
    try:
        loaded = load()
    except Unavailable as exc:
        return False, str(exc)
    platform = platform or probe()
    try:
        require(platform)
    except Unavailable as exc:
        return False, f"{found(loaded)} found, but {exc}"
    return True, ready(loaded, platform)
