"""Which release a producer or reader name runs, with the hash its project table pins: what the one hash
rule (released.admit) is applied to, in the parent process, before any child fetches or runs it.

- `pkg:NAME==VERSION:PATH[:FUNC]` and `aiter-src:pkg:NAME==VERSION`: the project whose package is NAME
  pins its wheel when its table's version is VERSION; any other version is unpinned;
- `preset:PROJECT/NAME`: the project's release, unless the code comes from a clone (`--checkout`, a
  table's own `local` folder, or a preset no release holds), which is not a release.
"""

from __future__ import annotations

from ...errors import ConfigError, ProducerError
from ...released import Package, admit, requirement, split_pkg
from ...sources import AITER_SRC_PREFIX, PKG_PREFIX, PRESET_PREFIX
from .table import for_package, project


def pinned(name: str, version: str) -> Package:
    """NAME==VERSION with the pin of the project table that binds NAME, if its version is VERSION."""
    found = for_package(name)
    if found is not None and found.version == version and found.sha256 is not None:
        return Package(name, version, found.sha256, found.wheel)
    return Package(name, version)


def release_of(name: str, repo=None) -> Package | None:
    """The release `name` runs (None: code from a file, a clone or fp8check itself); a name or version
    outside the standard grammar is refused here (released.requirement)."""
    if name.startswith(AITER_SRC_PREFIX + PKG_PREFIX):
        package, version = name[len(AITER_SRC_PREFIX + PKG_PREFIX):].partition("==")[::2]
        if not package or not version:
            raise ProducerError(f"{name}: expected aiter-src:pkg:amd-aiter==VERSION")
        return pinned(*requirement(package, version, name))
    if name.startswith(PKG_PREFIX):
        package, version, _, _ = split_pkg(name)
        return pinned(package, version)
    if name.startswith(PRESET_PREFIX):
        key = name[len(PRESET_PREFIX):]
        try:
            table = project(key.rpartition("/")[0])
        except ConfigError:
            return None  # an unknown project: resolving the preset names it
        entry = key.rpartition("/")[2]
        if repo is not None or table.local is not None or \
                any(p.needs_checkout for p in table.presets if p.name == entry):
            return None  # a clone's code (or none yet: resolving the preset asks for --checkout)
        return Package(table.package, table.version, table.sha256, table.wheel)
    return None


def admit_release(name: str, *, repo=None, allow_unpinned: bool) -> None:
    """The hash rule for the release `name` runs, if it runs one (released.admit)."""
    package = release_of(name, repo)
    if package is not None:
        admit(package, allow_unpinned=allow_unpinned, what=name)
