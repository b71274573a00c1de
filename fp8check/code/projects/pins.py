"""Which release a producer or reader name runs, with the hash its project table pins: what the one hash
rule (released.admit) is applied to, in the parent process, before any child fetches or runs it.

- `pkg:NAME==VERSION:PATH[:FUNC]` and `aiter-src:pkg:NAME==VERSION`: the project whose package is NAME
  pins its wheel when its table's version is VERSION; any other version is unpinned;
- `preset:PROJECT/NAME`: the project's release, unless the code comes from a clone (`--checkout`, a
  table's own `local` folder, or a preset no release holds), which is not a release.
"""

from __future__ import annotations

from ...core.errors import ConfigError
from ..names import Kind, Name
from ..released import Package, admit
from .table import for_package, project


def pinned(name: str, version: str) -> Package:
    """NAME==VERSION with the pin of the project table that binds NAME, if its version is VERSION."""
    found = for_package(name)
    if found is not None and found.version == version and found.sha256 is not None:
        return Package(name, version, found.sha256, found.wheel)
    return Package(name, version)


def release_of(name: Name, repo=None) -> Package | None:
    """The release `name` runs (None: code from a file, a clone or fp8check itself); its NAME and VERSION
    were checked against the standard grammar when the name was parsed (names.requirement)."""
    if name.package is not None:  # pkg:NAME==VERSION:..., aiter-src:pkg:NAME==VERSION
        return pinned(name.package, name.version)
    if name.kind is Kind.PRESET:
        owner, _, entry = name.body.rpartition("/")
        try:
            table = project(owner)
        except ConfigError:
            return None  # an unknown project: resolving the preset names it
        if repo is not None or table.local is not None or \
                any(p.needs_checkout for p in table.presets if p.name == entry):
            return None  # a clone's code (or none yet: resolving the preset asks for --checkout)
        return Package(table.package, table.version, table.sha256, table.wheel)
    return None


def admit_release(name: Name, *, repo=None, allow_unpinned: bool) -> None:
    """The hash rule for the release `name` runs, if it runs one (released.admit)."""
    package = release_of(name, repo)
    if package is not None:
        admit(package, allow_unpinned=allow_unpinned, what=name.text)
