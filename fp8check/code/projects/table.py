"""Project tables (projects/*.toml): how the names a project's file takes from its own project are bound,
where its released files come from, and the writers and readers it offers (presets). The format:
docs/ECOSYSTEM.md and the shipped tables; a preset also declares what its code supports (`fp8`, `layouts`,
`block_sizes`, `scale_fmts`, `shuffle_when_paged`), which a gate skips with the reason (Preset.unsupported).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from ...core.errors import ConfigError
from ..names import Kind, Name
from ..released import Package, admit
from .standins import CHECKED_ATTRIBUTES, RUN_FACTS, STANDINS, RunFacts

BINDING_KINDS = ("value", "run", "standin", "function", "attrs")


@dataclass(frozen=True)
class Bound:
    """One bound name: how its value is made for a run, and what it is (for reports)."""

    name: str
    describe: Callable[[], str]  # what it is, for reports (lazy: naming Triton's version imports Triton)
    make: Callable[[RunFacts, Callable], object]  # (facts, sibling loader) -> value
    attributes: tuple[str, ...] | None = None  # the attributes a file may use, where they are checked
    source: str | None = None  # `function =` bindings: the file that defines it (where it is not bound)


@dataclass(frozen=True)
class BindTable:
    project: str
    root: str  # the import root of the project's own modules ("vllm")
    always: dict[str, Bound] = field(default_factory=dict)
    fallbacks: dict[str, Bound] = field(default_factory=dict)
    shims: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def lookup(self, name: str) -> Bound:
        return self.always.get(name) or self.fallbacks[name]

    def for_file(self, path: str) -> "BindTable":
        """The table as a file sees it: a function it defines itself is never bound from it."""
        always = {k: b for k, b in self.always.items() if b.source != path}
        return self if len(always) == len(self.always) else dataclasses.replace(self, always=always)


@dataclass(frozen=True)
class Step:
    file: str
    call: str
    args: tuple = ()
    kwargs: tuple = ()  # (name, argument) pairs
    out: tuple[str, ...] = ()


@dataclass(frozen=True)
class Preset:
    """A writer or reader of a project, declared as one or more calls of its released functions."""

    project: str
    name: str
    role: str  # "writer" | "reader"
    description: str
    steps: tuple[Step, ...]
    returns: str | None = None  # readers: the value that is the logits
    outputs: tuple = ()  # readers: (name, fill) buffers allocated before the calls ([B*next_n, max_model_len])
    fp8: tuple[str, ...] = ("e4m3fn", "e4m3fnuz")
    layouts: tuple[str, ...] = ("linear", "shuffle")
    block_sizes: tuple[int, ...] | None = None  # None: any
    scale_fmts: tuple[str, ...] = ("ue8m0", "fp32")
    needs_checkout: bool = False  # its files are in the project's repository only (no release holds them)
    strip_asserts: str | None = None  # why its asserts are compiled out (python -O), or None
    shuffle_when_paged: bool = False  # its code picks the layout: shuffle when block_size > 1, linear at 1
    pad_slot: int = -1  # writers: where padding tokens go (-1: nowhere; N: a dummy slot it may write)

    @property
    def key(self) -> str:
        return f"{self.project}/{self.name}"  # `project` is the table's name or its file's path

    def unsupported(self, *, block_size: int, layout: str, fp8: str, scale_fmt: str) -> str | None:
        """Why its code cannot run this spec, as its table declares; None when it can."""
        if fp8 not in self.fp8:
            return f"{self.key} supports {', '.join(self.fp8)} only"
        if layout not in self.layouts:
            return f"{self.key} writes/reads the {', '.join(self.layouts)} layout only"
        if self.block_sizes is not None and block_size not in self.block_sizes:
            return f"{self.key} supports block_size {', '.join(map(str, self.block_sizes))} only"
        if scale_fmt not in self.scale_fmts:
            return f"{self.key} supports {', '.join(self.scale_fmts)} scales only"
        if self.shuffle_when_paged and (layout == "shuffle") != (block_size > 1):
            return f"{self.key} writes the shuffle layout whenever block_size > 1 and the linear one at block_size 1"
        return None


@dataclass(frozen=True)
class Project:
    name: str
    package: str
    version: str
    wheel: str | None
    sha256: str | None
    table: BindTable
    presets: tuple[Preset, ...]
    checkout_prefix: str = ""
    local: Path | None = None  # a table from a file may name a folder holding its files (`local = DIR`)


def _binding(where: str, name: str, spec) -> Bound:
    if not isinstance(spec, dict) or sum(k in spec for k in BINDING_KINDS) != 1:
        raise ConfigError(f"{where}: {name} must be a table with one of {', '.join(BINDING_KINDS)}")
    attributes = None
    if "value" in spec:
        value = spec["value"]
        make, describe = (lambda facts, sibling: value), lambda: f"{value!r} (project table)"
    elif "run" in spec:
        fact = RUN_FACTS.get(spec["run"])
        if fact is None:
            raise ConfigError(f"{where}: {name}: unknown run fact {spec['run']!r}; known: {', '.join(RUN_FACTS)}")
        make, describe = (lambda facts, sibling, f=fact[0]: f(facts)), lambda: fact[1]
    elif "standin" in spec:
        entry = STANDINS.get(spec["standin"])
        if entry is None:
            raise ConfigError(f"{where}: {name}: unknown stand-in {spec['standin']!r}; known: {', '.join(STANDINS)}")
        params = {k: v for k, v in spec.items() if k not in ("standin", "call")}
        make = lambda facts, sibling, e=entry[0], p=params: e(facts, p)  # noqa: E731
        describe = entry[1]
        attributes = CHECKED_ATTRIBUTES.get(spec["standin"])
    elif "function" in spec:
        path, sep, func = str(spec["function"]).rpartition(":")
        if not sep or not path or not func.isidentifier():
            raise ConfigError(f"{where}: {name}: function must be 'PATH:FUNC', got {spec['function']!r}")
        make, describe = (lambda facts, sibling, p=path, f=func: sibling(p, f)), lambda: f"{func} from {path} (same release)"
        return Bound(name, describe, make, None, path)
    else:
        attrs = spec["attrs"]
        if not isinstance(attrs, dict):
            raise ConfigError(f"{where}: {name}: attrs must be a table")
        members = {k: _binding(where, f"{name}.{k}", v) for k, v in attrs.items()}

        def make(facts, sibling, members=members):
            from types import SimpleNamespace
            return SimpleNamespace(**{k: b.make(facts, sibling) for k, b in members.items()})

        def describe(members=members):
            return "fp8check stand-in object: " + ", ".join(f"{k} = {b.describe()}" for k, b in members.items())
        attributes = tuple(members)
    if spec.get("call", False):
        inner, inner_describe = make, describe
        make = lambda facts, sibling, inner=inner: (lambda *a, **k: inner(facts, sibling))  # noqa: E731
        describe = lambda: f"a function returning {inner_describe()}"  # noqa: E731
    return Bound(name, describe, make, attributes)


def _tuple(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (value,)


def _step(where: str, raw: dict) -> Step:
    if set(raw) - {"file", "call", "args", "kwargs", "out"} or "file" not in raw or "call" not in raw:
        raise ConfigError(f"{where}: a step needs file and call (and may have args, kwargs, out); got {sorted(raw)}")
    kwargs = raw.get("kwargs", {})
    return Step(raw["file"], raw["call"], tuple(raw.get("args", [])), tuple(kwargs.items()), _tuple(raw.get("out", [])))


PRESET_KEYS = ("name", "description", "step", "returns", "outputs", "fp8", "layouts", "block_sizes", "scale_fmts",
               "needs_checkout", "strip_asserts", "shuffle_when_paged", "pad_slot")


def _preset(where: str, project: str, role: str, raw: dict) -> Preset:
    steps = tuple(_step(f"{where} {role} {raw.get('name')}", s) for s in raw.get("step", []))
    if not steps or "name" not in raw:
        raise ConfigError(f"{where}: every [[{role}]] needs a name and at least one [[{role}.step]]")
    unknown = sorted(set(raw) - set(PRESET_KEYS))
    if unknown:
        raise ConfigError(f"{where}: [[{role}]] {raw['name']}: unknown key(s) {', '.join(unknown)};"
                          f" known: {', '.join(PRESET_KEYS)}")
    pad_slot = raw.get("pad_slot", -1)
    if not isinstance(pad_slot, int) or isinstance(pad_slot, bool) or pad_slot < -1:
        raise ConfigError(f"{where}: [[{role}]] {raw['name']}: pad_slot must be -1 or a slot >= 0, got {pad_slot!r}")
    given = {key: _tuple(raw[key]) for key in ("fp8", "layouts", "block_sizes", "scale_fmts") if key in raw}
    given.update({key: bool(raw[key]) for key in ("needs_checkout", "shuffle_when_paged") if key in raw})
    return Preset(project, raw["name"], role, raw.get("description", ""), steps, raw.get("returns"),
                  tuple(raw.get("outputs", {}).items()), strip_asserts=raw.get("strip_asserts"),
                  pad_slot=pad_slot, **given)


TABLE_KEYS = ("project", "bind", "fallback", "shims", "writer", "reader")
PROJECT_KEYS = ("name", "package", "version", "root", "repository", "wheel", "sha256", "bindings_from", "local",
                "checkout_prefix")


def parse(data: dict, where: str, folder: Path | None = None) -> Project:
    """A project table's contents (`folder`: where a table file lies, for its `local` folder)."""
    head = data.get("project")
    if not isinstance(head, dict) or not {"name", "package", "version", "root"} <= set(head):
        raise ConfigError(f"{where}: [project] needs name, package, version and root")
    for section, given, known in (("the table", data, TABLE_KEYS), ("[project]", head, PROJECT_KEYS)):
        unknown = sorted(set(given) - set(known))
        if unknown:  # a misspelt key would otherwise be a default, silently
            raise ConfigError(f"{where}: {section}: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
    name = head["name"]
    always = {k: _binding(where, k, v) for k, v in data.get("bind", {}).items()}
    fallbacks = {k: _binding(where, k, v) for k, v in data.get("fallback", {}).items()}
    shims = {k: tuple(v) for k, v in data.get("shims", {}).items()}
    if "bindings_from" in head:  # another project's names, under this table's own
        other = project(head["bindings_from"]).table
        always, fallbacks, shims = {**other.always, **always}, {**other.fallbacks, **fallbacks}, {**other.shims, **shims}
    table = BindTable(name, head["root"], always, fallbacks, shims)
    owner = where if where.endswith(".toml") and folder is not None else name  # presets of a table file: by its path
    presets = tuple(_preset(where, owner, role, raw) for role in ("writer", "reader") for raw in data.get(role, []))
    local = (folder / head["local"]) if "local" in head and folder is not None else None
    return Project(name, head["package"], head["version"], head.get("wheel"), head.get("sha256"), table, presets,
                   head.get("checkout_prefix", ""), local)


@functools.cache
def projects() -> dict[str, Project]:
    """The shipped project tables, by name (fp8check/code/projects/*.toml)."""
    from ...core.config import load_toml
    items = sorted((i for i in resources.files(__package__).iterdir() if i.name.endswith(".toml")),
                   key=lambda i: i.name)
    return {p.name: p for p in (parse(load_toml(Path(str(item))), item.name) for item in items)}


_FILES: dict[str, Project] = {}
_PARSING: list[str] = []  # table files being parsed, outermost first: a bindings_from cycle is named as one


def project(name: str) -> Project:
    """A shipped project by name, or a project table file (`PATH.toml`: the user's own tables)."""
    if name.endswith(".toml"):
        from ...core.config import load_toml

        path = Path(name).resolve()
        if str(path) not in _FILES:
            if str(path) in _PARSING:
                cycle = [*_PARSING[_PARSING.index(str(path)):], str(path)]
                raise ConfigError(f"{name}: bindings_from makes a cycle: {' -> '.join(cycle)}")
            _PARSING.append(str(path))
            try:
                _FILES[str(path)] = parse(load_toml(path), name, path.parent)
            finally:
                _PARSING.pop()
        return _FILES[str(path)]
    found = projects().get(name)
    if found is None:
        raise ConfigError(f"unknown project {name!r}; known: {', '.join(projects())}")
    return found


def for_package(package: str) -> Project | None:
    """The project whose table binds a package's files (pkg:NAME==...), if fp8check has one."""
    wanted = package.lower().replace("_", "-")
    return next((p for p in projects().values() if p.package.lower().replace("_", "-") == wanted), None)


def preset(key: str, role: str) -> Preset:
    """`PROJECT/NAME` -> the project's writer or reader (`role`) of that name; PROJECT is a shipped
    project's name or the path of a project table (`tables/mine.toml/NAME`)."""
    name, _, entry = key.rpartition("/")
    found = next((p for p in project(name).presets if p.name == entry and p.role == role), None)
    if found is None:
        known = ", ".join(p.key for p in project(name).presets if p.role == role) or "none"
        raise ConfigError(f"unknown {role} preset {key!r}; {name}'s {role}s: {known}")
    return found


def pinned(name: str, version: str) -> Package:
    """NAME==VERSION with the pin of NAME's project table where its version is VERSION, else unpinned."""
    found = for_package(name)
    if found is not None and found.version == version and found.sha256 is not None:
        return Package(name, version, found.sha256, found.wheel)
    return Package(name, version)


def admit_release(name: Name, *, repo=None, allow_unpinned: bool) -> None:
    """The hash rule, in the parent before any child fetches or runs it, for the release `name` runs: a
    `pkg:` or `aiter-src:pkg:` release (its NAME and VERSION were checked against the standard grammar when
    the name was parsed), or a preset's project release, unless its code comes from a clone (`--checkout`,
    a table's own `local` folder, or a preset no release holds)."""
    if name.package is not None:
        package = pinned(name.package, name.version)
    elif name.kind is Kind.PRESET:
        owner, _, entry = name.body.rpartition("/")
        try:
            table = project(owner)
        except ConfigError:
            return  # an unknown project: resolving the preset names it
        if repo is not None or table.local is not None or \
                any(p.needs_checkout for p in table.presets if p.name == entry):
            return  # a clone's code (or none yet: resolving the preset asks for --checkout)
        package = Package(table.package, table.version, table.sha256, table.wheel)
    else:
        return
    admit(package, allow_unpinned=allow_unpinned, what=name.text)
