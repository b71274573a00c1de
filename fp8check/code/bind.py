"""One function of a project's source file, run as it is, without the project installed (`vllm-file:`,
`pkg:`, `preset:`; load.py).

None of the file's imports of its own project or its module-level platform code runs: FUNC and the top-level
definitions it needs (transitively, found with `ast` and `symtable`) are compiled, unmodified and at their own
line numbers, into a fresh namespace where the project table's names (projects/table.py) are bound to the run.
A name the loader cannot provide is refused in one line naming the file, the function and the name.
"""

from __future__ import annotations

import ast
import builtins
import linecache
import symtable
import sys
import types
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..core.errors import ProducerError
from .projects.standins import RunFacts
from .projects.table import BindTable
from ..core.spec import FP8Format, Layout

ALLOWED_IMPORT_ROOTS = frozenset(sys.stdlib_module_names) | {"torch", "triton", "numpy"}


@dataclass
class Binding:
    """The namespace a project's function runs in, and what was bound in it."""

    namespace: dict
    facts: RunFacts
    table: BindTable
    sibling: Callable
    names: tuple[str, ...] = ()  # the bound names in the namespace
    shims: dict = field(default_factory=dict)  # module name -> the module object served to body imports
    bound: dict[str, str] = field(default_factory=dict)  # name -> what it is, for reports

    def fill(self) -> None:
        """(Re)make every bound value for the current facts (a writer is bound to each run's spec)."""
        values = {name: self.table.lookup(name).make(self.facts, self.sibling) for name in self.names}
        self.namespace.update(values)
        for module, names in self.table.shims.items():
            for name in names:
                value = values[name] if name in values else self.table.lookup(name).make(self.facts, self.sibling)
                setattr(self.shims[module], name, value)

    def rebind(self, fp8: FP8Format, layout: Layout | None = None, device: torch.device | None = None) -> None:
        """Bind the run facts to another FP8 format (and layout, and device)."""
        self.facts.fp8 = fp8
        if layout is not None:
            self.facts.layout = layout
        if device is not None:
            self.facts.device = torch.device(device)
        self.fill()


@dataclass(frozen=True)
class Definition:
    name: str
    node: ast.stmt
    kind: str  # "def" | "assign" | "import"
    needs: frozenset[str]


@dataclass
class Missing(Exception):
    """A name the loader cannot provide (carried to the one-line ProducerError)."""

    name: str
    chain: tuple[str, ...]
    detail: str = ""


def _scope_globals(table: symtable.SymbolTable) -> set[str]:
    names = set(table.get_globals()) if isinstance(table, symtable.Function) else set()
    if isinstance(table, symtable.Class):
        names |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_global()}
    for child in table.get_children():
        names |= _scope_globals(child)
    return names


def _loaded_names(nodes) -> set[str]:
    return {n.id for node in nodes if node is not None for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _def_time_nodes(node, annotations: bool) -> list:
    """Expressions evaluated when a def or class statement runs: decorators, defaults, bases, and a function's
    annotations unless `from __future__ import annotations` defers them."""
    out = list(node.decorator_list)
    if isinstance(node, ast.ClassDef):
        return out + node.bases + [k.value for k in node.keywords]
    args = node.args
    out += args.defaults + [d for d in args.kw_defaults if d is not None]
    if annotations:
        out.append(node.returns)
        out += [a.annotation for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if a]
    return out


def definitions(tree: ast.Module, source: str, filename: str) -> dict[str, list[Definition]]:
    """Top-level definitions of the file, by name, each with the global names it needs."""
    tables = {}
    for child in symtable.symtable(source, filename, "exec").get_children():
        tables.setdefault((child.get_name(), child.get_lineno()), child)
    defs: dict[str, list[Definition]] = {}
    future_annotations = any(isinstance(s, ast.ImportFrom) and s.module == "__future__" and
                             any(a.name == "annotations" for a in s.names) for s in tree.body)
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            table = tables.get((stmt.name, stmt.lineno))
            needs = _loaded_names(_def_time_nodes(stmt, not future_annotations)) | (
                _scope_globals(table) if table else set())
            defs.setdefault(stmt.name, []).append(Definition(stmt.name, stmt, "def", frozenset(needs)))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if isinstance(target, ast.Name):
                    defs.setdefault(target.id, []).append(
                        Definition(target.id, stmt, "assign", frozenset(_loaded_names([stmt.value]))))
        elif isinstance(stmt, ast.Import) or isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__":
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                defs.setdefault(name, []).append(Definition(name, stmt, "import", frozenset()))
    return defs


@dataclass
class Plan:
    """What will run: the file's statements (by identity), imports of single aliases, bound names."""

    statements: dict[int, ast.stmt] = field(default_factory=dict)
    imports: list[ast.stmt] = field(default_factory=list)
    bound: dict[str, str] = field(default_factory=dict)  # name -> "fallback" | "platform" | "shim"
    executed: list[str] = field(default_factory=list)

    def snapshot(self) -> "Plan":
        return Plan(dict(self.statements), list(self.imports), dict(self.bound), list(self.executed))


class Resolver:
    """Finds, for FUNC, every top-level definition it needs, and what must be bound instead."""

    def __init__(self, defs: dict[str, list[Definition]], table: BindTable):
        self.defs, self.table = defs, table
        self.plan = Plan()
        self.done: set[str] = set()

    def need(self, name: str, chain: tuple[str, ...] = ()) -> None:
        if name in self.done:
            return
        self.done.add(name)
        if name in self.table.always:
            self.plan.bound[name] = "platform"
            return
        definition = self.defs.get(name, [None])[-1]  # the last binding is the one a call sees
        try:
            if definition is None:
                if hasattr(builtins, name) or name in ("__name__", "__file__"):
                    return
                raise Missing(name, chain)
            self._take(definition, chain + (name,))
        except Missing:
            if name not in self.table.fallbacks:
                raise
            self.plan.bound[name] = "fallback"

    def _take(self, definition: Definition, chain: tuple[str, ...]) -> None:
        if definition.kind == "import":
            return self._import(definition, chain)
        # What this definition pulled in is dropped again if it turns out unusable (a fallback may replace it).
        plan, done = self.plan.snapshot(), set(self.done)
        try:
            for needed in sorted(definition.needs):
                self.need(needed, chain)
            self._body_imports(definition.node, chain)
            self._platform_attributes(definition.node, chain)
        except Missing:
            self.plan, self.done = plan, done
            raise
        self.plan.statements[id(definition.node)] = definition.node
        self.plan.executed.append(definition.name)

    def _import(self, definition: Definition, chain: tuple[str, ...]) -> None:
        stmt, name = definition.node, definition.name
        alias = next(a for a in stmt.names if (a.asname or a.name.split(".")[0]) == name)
        module = stmt.module if isinstance(stmt, ast.ImportFrom) else alias.name
        if isinstance(stmt, ast.ImportFrom) and stmt.level:
            raise Missing(name, chain, f"a relative import from .{module or ''}")
        if module.split(".")[0] in ALLOWED_IMPORT_ROOTS:
            node = (ast.ImportFrom(module=module, names=[alias], level=0) if isinstance(stmt, ast.ImportFrom)
                    else ast.Import(names=[alias]))
            self.plan.imports.append(ast.copy_location(node, stmt))
            return
        shim_names = self.table.shims.get(module, ())
        provided = alias.name if isinstance(stmt, ast.ImportFrom) else None
        if provided in shim_names and provided == name or name in self.table.fallbacks:
            self.plan.bound[name] = "fallback"
            return
        raise Missing(name, chain, f"imported from {module}")

    def _body_imports(self, node: ast.stmt, chain: tuple[str, ...]) -> None:
        """`from ROOT.X import Y` inside a function body runs at call time: it must be a shim we serve."""
        root = self.table.root
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and sub.module and sub.module.split(".")[0] == root and not sub.level:
                for alias in sub.names:
                    if alias.name not in self.table.shims.get(sub.module, ()):
                        raise Missing(f"{sub.module}.{alias.name}", chain)
                    self.plan.bound[alias.name] = "shim"
            elif isinstance(sub, ast.Import) and any(a.name.split(".")[0] == root for a in sub.names):
                raise Missing(next(a.name for a in sub.names if a.name.split(".")[0] == root), chain)

    def _platform_attributes(self, node: ast.stmt, chain: tuple[str, ...]) -> None:
        checked = {name: bound.attributes for name, bound in self.table.always.items() if bound.attributes is not None}
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                    and sub.value.id in checked and sub.attr not in checked[sub.value.id]):
                raise Missing(f"{sub.value.id}.{sub.attr}", chain)


def _importer(shims: dict[str, types.ModuleType]) -> Callable:
    real = builtins.__import__

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A001 - the builtin's name
        if level == 0 and fromlist and name in shims:
            return shims[name]
        return real(name, globals, locals, fromlist, level)

    return __import__


@dataclass(frozen=True)
class Compiled:
    fn: Callable
    binding: Binding
    executed: tuple[str, ...]


def _plan(source: str, *, filename: str, label: str, file: str, func: str, role: str, table: BindTable):
    """(tree, plan): what of the file FUNC needs, or one ProducerError line naming the missing name."""
    try:
        tree = ast.parse(source, filename=filename)
        defs = definitions(tree, source, filename)
    except SyntaxError as exc:
        raise ProducerError(f"{role} {label!r}: {file} is not valid Python (line {exc.lineno}: {exc.msg})") from None
    if not any(d.kind == "def" for d in defs.get(func, [])):
        raise ProducerError(f"{role} {label!r}: {file} has no top-level function {func!r}")
    resolver = Resolver(defs, table)
    try:
        resolver.need(func)
    except Missing as missing:
        detail = f" ({missing.detail})" if missing.detail else ""
        via = f" through {' -> '.join(missing.chain[:-1])}" if len(missing.chain) > 2 else ""
        provider = "vllm-file loader" if table.project == "vllm" else f"{table.project} project table"
        raise ProducerError(f"{role} {label!r}: {file}: {func} needs {missing.name!r}{detail}{via}, which the"
                            f" {provider} cannot provide") from None
    return tree, resolver.plan


def _no_sibling(path: str, func: str):
    raise ProducerError(f"{func} from {path}: this file's origin cannot provide other files of its project")


def compile_function(source: str, *, label: str, file: str, func: str, sha256: str, role: str,
                     fp8: FP8Format | None, device: torch.device | None = None, table: BindTable | None = None,
                     layout: Layout | None = None, sibling: Callable | None = None,
                     strip_asserts: bool = False) -> Compiled:
    """FUNC of `source` and everything it needs, compiled into a fresh namespace where the names the
    project table binds are bound to the run (see the module doc; the default table is vLLM's).
    `sibling(path, func)` loads another function of the same release (`function =` bindings);
    `strip_asserts` compiles as `python -O` does (a launcher that asserts it runs on a GPU)."""
    from .projects.table import project

    table = (table or project("vllm").table).for_file(file)
    filename = f"<fp8check {label} sha256:{sha256[:12]}>"  # never a real path: no stale on-disk reads
    tree, plan = _plan(source, filename=filename, label=label, file=file, func=func, role=role, table=table)
    facts = RunFacts(fp8 or FP8Format.E4M3FN, layout, device or torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    shims = {module: types.ModuleType(module) for module in table.shims}
    namespace = {"__name__": f"fp8check_project_file_{sha256[:16]}", "__file__": filename,
                 "__builtins__": {**vars(builtins), "__import__": _importer(shims)}}
    binding = Binding(namespace, facts, table, sibling or _no_sibling, tuple(plan.bound), shims)
    binding.fill()
    futures = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    body = futures + plan.imports + [s for s in tree.body if id(s) in plan.statements]
    # Triton reads kernel source through inspect: it must see exactly the text that was hashed and compiled.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        exec(compile(ast.Module(body=body, type_ignores=[]), filename, "exec", optimize=1 if strip_asserts else -1),
             namespace)
    except Exception as exc:
        raise ProducerError(f"{role} {label!r}: {file}: the definitions {func} needs failed to run:"
                            f" {type(exc).__name__}: {exc}") from exc
    origin = "from --fp8" if fp8 is not None else "from each run's --fp8"
    for name in sorted(plan.bound):
        value, text = namespace.get(name), table.lookup(name).describe()
        if isinstance(value, torch.dtype):
            text = f"{value} {origin}"
        elif hasattr(value, "describe"):
            text = f"{value.describe()} ({origin})"
        binding.bound[name] = text
    return Compiled(namespace[func], binding, tuple(plan.executed))
