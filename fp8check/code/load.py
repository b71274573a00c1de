"""The one loader of a function from code, and its one cache of compiled functions (`Files`).

`file:` runs the file as a fresh module (the user's module, imports and all); `vllm-file:`, `pkg:` and a
preset's steps compile only FUNC and what it needs, bound by the project's table (bind.py). The bytes executed
are the bytes hashed, and their provenance travels with the function into every report.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from ..core.device import require_triton_format
from ..core.errors import ProducerError, failure, one_line
from ..core.isolation import exited
from ..core.producer import DEFAULT_WRITER, EXTRA_KEYWORDS, Producer
from ..core.spec import FP8Format, Layout
from .names import CODE_KINDS, Kind, Name, Source, forms, parse, read_source


@dataclass(frozen=True)
class LoadedFunction:
    """A function taken from code, with its provenance (file, function, git revision and commit, sha256
    of the source that ran, names bound by the loader)."""

    fn: Callable
    provenance: dict
    uses_triton: bool = False  # it holds Triton kernels: on the CPU they run in the exact interpreter
    rebind: Callable | None = None  # vllm-file, pkg: binds FP8_DTYPE / current_platform to a run's format
    description: str = ""  # a preset's


def _kernels(namespace: dict) -> tuple:
    """The Triton kernels (jit, interpreted, autotuned) a module namespace holds."""
    if "triton" not in sys.modules:
        return ()
    from triton.runtime.jit import KernelInterface

    return tuple(v for v in namespace.values() if isinstance(v, KernelInterface))


@dataclass
class Files:
    """Functions compiled from one origin's files (`read(path) -> Source`), each once, with the project
    table's bindings (None: vLLM's), and every binding to rebind before a run."""

    read: Callable[[str], Source]
    table: object
    role: str
    label: str
    fp8: FP8Format | None = None
    device: torch.device | None = None
    strip_asserts: bool = False
    functions: dict = field(default_factory=dict)  # (path, func) -> bind.Compiled
    files: dict = field(default_factory=dict)  # path -> provenance of its bytes

    def function(self, path: str, func: str, label: str | None = None):
        if (path, func) not in self.functions:
            from .bind import compile_function

            source = self.read(path)
            self.files[path] = source.provenance
            file = source.provenance["file"]
            try:
                text = source.data.decode("utf-8")
            except UnicodeDecodeError:
                raise ProducerError(f"{self.role} {self.label!r}: {file} is not UTF-8 text") from None
            self.functions[path, func] = compile_function(
                text, label=label or f"{self.label} {path}", file=file, func=func,
                sha256=source.provenance["sha256"], role=self.role, fp8=self.fp8, device=self.device,
                table=self.table, strip_asserts=self.strip_asserts,
                sibling=lambda p, f: self.function(p, f).fn)
        return self.functions[path, func]

    def rebind(self, fp8: FP8Format, layout: Layout | None = None, device: torch.device | None = None) -> None:
        for compiled in list(self.functions.values()):
            compiled.binding.rebind(fp8, layout, device)

    def kernels(self) -> tuple:
        return tuple(k for c in self.functions.values() for k in _kernels(c.binding.namespace))


def _function(name: Name, *, role: str, default_function: str | None) -> str:
    """The name's FUNC, else `default_function`; a name that needs one and has none is refused."""
    if name.function is not None:
        return name.function
    if default_function is None:
        prefix = name.kind.value
        forms_ = (f"{prefix}NAME==VERSION:PATH:FUNC",) if name.kind is Kind.PKG else (
            f"{prefix}PATH:FUNC", f"{prefix}git:REV:PATH:FUNC")
        raise ProducerError(f"{role} {name.text!r}: expected {' or '.join(forms_)}")
    return default_function


def _source(text: str, file_text: str, role: str, repo: Path | None) -> Source:
    try:
        return read_source(file_text, repo, error=ProducerError)
    except ProducerError as exc:
        raise ProducerError(f"{role} {text!r}: {exc}") from None


def import_source(source: Source, label: str, role: str = "producer") -> types.ModuleType:
    """Execute a user's file as a fresh module; its failures become one ProducerError line. The bytes hashed are
    the bytes run, and their lines are put in linecache for Triton, which reads kernel source through inspect."""
    module_name = f"fp8check_plugin_{source.provenance['sha256'][:16]}"
    filename = f"<fp8check {label}>" if "commit" in source.provenance else str(Path(source.label).resolve())
    module = types.ModuleType(module_name)
    module.__file__ = filename
    text = source.data.decode("utf-8", errors="replace")
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    sys.modules[module_name] = module
    try:
        exec(compile(source.data, filename, "exec"), module.__dict__)
    except SystemExit as exc:  # --in-process: worded as a child's exit would be
        raise ProducerError(exited(f"{role} {label!r}", exc.code, "loading")) from exc
    except Exception as exc:  # the plugin's own code failed: name it and where, keep the cause for --debug
        at = (one_line(f"{exc.filename}:{exc.lineno}: {(exc.text or '').strip()}")
              if isinstance(exc, SyntaxError) and exc.lineno else None)
        raise ProducerError(f"{role} {label!r}: {source.provenance['file']} failed to import:"
                            f" {failure(exc, at)}") from exc
    return module


def load_function(text: str, *, role: str = "producer", fp8: FP8Format | None = None,
                  default_function: str = DEFAULT_WRITER, repo: Path | None = None,
                  device: torch.device | None = None) -> LoadedFunction:
    """`file:`, `vllm-file:` or `pkg:` name -> the function and its provenance; call `prepare_to_run` before it
    runs. `fp8`: the format the platform names are bound to (None: per run, through `rebind`); `repo`: where
    `git:` reads; `device`: where a workspace stand-in allocates (default: cuda when available)."""
    name = parse(text, error=ProducerError)
    if name.kind not in CODE_KINDS:
        raise ProducerError(f"{role} {text!r}: expected {forms(*CODE_KINDS)}")
    if name.kind is Kind.FILE:
        func_name = _function(name, role=role, default_function=None)
        source = _source(text, name.path, role, repo)
        module = import_source(source, text, role)
        fn = getattr(module, func_name, None)
        if not callable(fn):
            raise ProducerError(f"{role} {text!r}: {source.provenance['file']} has no function {func_name!r}")
        return LoadedFunction(fn, {"loader": "file", **source.provenance, "function": func_name},
                              bool(_kernels(vars(module))))
    func = _function(name, role=role, default_function=default_function)
    if name.kind is Kind.VLLM_FILE:
        files = Files(lambda path: _source(text, path, role, repo), None, role, text, fp8, device)
    else:
        from .projects.table import BindTable, for_package, pinned
        from .released import read_file

        project, package = for_package(name.package), pinned(name.package, name.version)
        table = project.table if project is not None else BindTable(name.package, name.package.replace("-", "_"))
        files = Files(lambda path: read_file(package, path), table, role, text, fp8, device)
    compiled = files.function(name.path, func, label=text)
    provenance = {"loader": name.kind.value[:-1], **files.files[name.path], "function": func,
                  "bound": dict(compiled.binding.bound), "executed": list(compiled.executed)}
    return LoadedFunction(compiled.fn, provenance, bool(files.kernels()), files.rebind)


def prepare_to_run(loaded: LoadedFunction, fp8: FP8Format, device: torch.device) -> None:
    """Before a loaded function runs: its bound names follow the run's device, and on the CPU its Triton kernels
    run only in the proven exact interpreter, else ExactConversionError (a ProducerError, one line)."""
    if loaded.rebind is not None:
        loaded.rebind(fp8, device=device)
    if loaded.uses_triton and device.type != "cpu":
        require_triton_format(fp8, device)
    elif loaded.uses_triton:
        from ..triton_cpu.known_answers import require_any_kernel

        require_any_kernel(fp8)


def load_writer(text: str, *, fp8: FP8Format | None = None, repo: Path | None = None) -> Producer:
    """A Producer around a writer function from code (see load_function)."""
    loaded = load_function(text, fp8=fp8, repo=repo)
    fn, func_name = loaded.fn, loaded.provenance["function"]
    signature = None
    try:
        signature = inspect.signature(fn)
        signature.bind(None, None, None, None, None)
    except (TypeError, ValueError):  # ValueError: a builtin without a signature Python can read
        has = f"has {func_name}{signature}" if signature is not None else "has no signature Python can read"
        raise ProducerError(f"producer {text!r}: {func_name} must take (k, kv_cache, slot_mapping, quant_block_size,"
                            f" scale_fmt), {has}") from None
    keywords = frozenset(k for k in EXTRA_KEYWORDS if k in signature.parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()))
    where = loaded.provenance["file"]
    if "commit" in loaded.provenance:
        where += f" at {loaded.provenance['revision']} ({loaded.provenance['commit'][:12]})"
    if loaded.rebind is None:
        writer = fn
    else:  # vllm-file, pkg: FP8_DTYPE / current_platform follow each run's --fp8
        taken, keywords = keywords, keywords | {"fp8_dtype"}

        def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype, **extra):
            loaded.rebind(FP8Format.from_torch_dtype(fp8_dtype), device=kv_cache.device)
            passed = {**extra, "fp8_dtype": fp8_dtype}
            fn(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, **{key: passed[key] for key in passed
                                                                          if key in taken})
    return Producer(text, f"{func_name} from {where}", writer, keywords=keywords, provenance=loaded.provenance,
                    check=lambda spec, device: prepare_to_run(loaded, spec.fp8, device),
                    triton=loaded.uses_triton)
