"""Writers (and readers) taken from the user's own Python files.

- `file:PATH:FUNC` / `file:git:REV:PATH:FUNC`: the file is executed as a fresh module (it is the user's
  module, imports and all) and FUNC taken from it;
- `vllm-file:PATH[:FUNC]` / `vllm-file:git:REV:PATH[:FUNC]`: only FUNC and what it needs, from a vLLM
  source file, with vLLM's platform names bound to the run (code/bind.py).

The bytes executed are the bytes hashed: a file is read once, and its provenance (file, function, git
revision and commit, sha256, bound names) travels with the loaded function into every report.
Signature inspection happens once, here, at load time: the Producer records which optional keywords
the function takes, so the runner never sniffs signatures.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..core.device import require_triton_format
from ..core.errors import ProducerError, failure, one_line
from .names import CODE_KINDS, Kind, Name, Source, forms, parse, read_source
from ..core.spec import CacheSpec, FP8Format
from ..core.producer import DEFAULT_WRITER, EXTRA_KEYWORDS, Producer



def _accepts(params, keyword: str) -> bool:
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@dataclass(frozen=True)
class LoadedFunction:
    """A function taken from a user's file, with what was checked: the text given, and its provenance
    (file, function, git revision and commit, sha256 of the source that ran, names bound by the loader).
    `rebind(fmt)` (vllm-file only) binds FP8_DTYPE / current_platform to another FP8 format."""

    fn: Callable
    label: str
    provenance: dict
    uses_triton: bool = False  # it holds Triton kernels: on the CPU they run in the exact interpreter
    kernels: tuple = ()  # those kernels
    rebind: Callable[[FP8Format], None] | None = None


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
    """Execute a user's file as a fresh module; its failures become one ProducerError line.

    The bytes hashed are the bytes run: the code is compiled from `source.data`, and its lines are put
    in linecache under the file's name so Triton (which reads kernel source through inspect) sees them.
    """
    digest = source.provenance["sha256"][:16]
    module_name = f"fp8check_plugin_{digest}"
    git = "commit" in source.provenance
    filename = f"<fp8check {label}>" if git else str(Path(source.label).resolve())
    module = types.ModuleType(module_name)
    module.__file__ = filename
    text = source.data.decode("utf-8", errors="replace")
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    sys.modules[module_name] = module
    try:
        exec(compile(source.data, filename, "exec"), module.__dict__)
    except Exception as exc:  # the plugin's own code failed: name it and where, keep the cause for --debug
        at = None
        if isinstance(exc, SyntaxError) and exc.lineno:
            at = one_line(f"{exc.filename}:{exc.lineno}: {(exc.text or '').strip()}")
        raise ProducerError(f"{role} {label!r}: {source.provenance['file']} failed to import:"
                            f" {failure(exc, at)}") from exc
    return module


def _kernels(namespace: dict) -> tuple:
    """The Triton kernels (jit, interpreted, autotuned) a module namespace holds."""
    if "triton" not in sys.modules:
        return ()
    from triton.runtime.jit import KernelInterface

    return tuple(v for v in namespace.values() if isinstance(v, KernelInterface))


def load_function(text: str, *, role: str = "producer", fp8: FP8Format | None = None,
                  default_function: str = DEFAULT_WRITER, repo: Path | None = None,
                  device: torch.device | None = None) -> LoadedFunction:
    """`file:[git:REV:]PATH:FUNC` or `vllm-file:[git:REV:]PATH[:FUNC]` -> the function and its provenance.

    `role` names the thing in error messages ("producer", "reader"); `fp8` is the format vLLM's platform
    names are bound to (vllm-file; None: bound per run through `rebind`); `default_function` is FUNC
    when a vllm-file target names none; `repo` is the repository `git:` reads from (default: the
    current directory's); `device` is where vllm-file's workspace stand-in allocates (default: cuda when
    available, else cpu). Before the function runs on the CPU, call `prepare_to_run`.
    """
    name = parse(text, error=ProducerError)
    if name.kind is Kind.VLLM_FILE:
        return _load_vllm(name, role=role, fp8=fp8, default_function=default_function, repo=repo, device=device)
    if name.kind is Kind.PKG:
        return _load_pkg(name, role=role, fp8=fp8, default_function=default_function, device=device)
    if name.kind is not Kind.FILE:
        raise ProducerError(f"{role} {text!r}: expected {forms(*CODE_KINDS)}")
    func_name = _function(name, role=role, default_function=None)
    source = _source(text, name.path, role, repo)
    module = import_source(source, text, role)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise ProducerError(f"{role} {text!r}: {source.provenance['file']} has no function {func_name!r}")
    provenance = {"loader": "file", **source.provenance, "function": func_name}
    kernels = _kernels(vars(module))
    return LoadedFunction(fn, text, provenance, uses_triton=bool(kernels), kernels=kernels)


def _load_vllm(name: Name, *, role: str, fp8, default_function: str, repo, device) -> LoadedFunction:
    from .bind import compile_function

    text, func_name = name.text, _function(name, role=role, default_function=default_function)
    source = _source(text, name.path, role, repo)
    try:
        code = source.data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProducerError(f"{role} {text!r}: {source.provenance['file']} is not UTF-8 text") from None
    compiled = compile_function(code, label=text, file=source.provenance["file"], func=func_name,
                                sha256=source.provenance["sha256"], role=role, fp8=fp8, device=device)
    provenance = {"loader": "vllm-file", **source.provenance, "function": func_name,
                  "bound": dict(compiled.binding.bound), "executed": list(compiled.executed)}
    kernels = _kernels(compiled.binding.namespace)
    return LoadedFunction(compiled.fn, text, provenance, uses_triton=bool(kernels), kernels=kernels,
                          rebind=compiled.binding.rebind)


def _load_pkg(pkg: Name, *, role: str, fp8, default_function, device) -> LoadedFunction:
    """`pkg:NAME==VERSION:PATH[:FUNC]`: FUNC of PATH in the released wheel, bound by the package's project
    table (projects/*.toml; a package without one gets only the standard library, torch and Triton)."""
    from .projects.table import BindTable, for_package
    from .released import read_file
    from .projects.pins import pinned
    from .bind import compile_function

    text, name, version, path = pkg.text, pkg.package, pkg.version, pkg.path
    func = _function(pkg, role=role, default_function=default_function)
    project = for_package(name)
    package = pinned(name, version)
    table = project.table if project is not None else BindTable(name, name.replace("-", "_"))
    compiled_files: dict = {}

    def sibling(other_path: str, other_func: str):
        key = (other_path, other_func)
        if key not in compiled_files:
            other = read_file(package, other_path)
            compiled_files[key] = compile_function(
                other.text, label=f"{text} {other_path}", file=other_path, func=other_func,
                sha256=other.provenance["sha256"], role=role, fp8=fp8, device=device, table=table, sibling=sibling)
        return compiled_files[key].fn

    source = read_file(package, path)
    try:
        code = source.data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProducerError(f"{role} {text!r}: {path} is not UTF-8 text") from None
    compiled = compile_function(code, label=text, file=path, func=func, sha256=source.provenance["sha256"], role=role,
                                fp8=fp8, device=device, table=table, sibling=sibling)
    bindings = [compiled.binding] + [c.binding for c in compiled_files.values()]

    def rebind(fmt: FP8Format, device: torch.device | None = None) -> None:
        for binding in bindings:
            binding.rebind(fmt, device=device)

    provenance = {"loader": "pkg", **source.provenance, "function": func,
                  "bound": dict(compiled.binding.bound), "executed": list(compiled.executed)}
    kernels = _kernels(compiled.binding.namespace) + tuple(k for c in compiled_files.values()
                                                            for k in _kernels(c.binding.namespace))
    return LoadedFunction(compiled.fn, text, provenance, uses_triton=bool(kernels), kernels=kernels, rebind=rebind)


def prepare_to_run(loaded: LoadedFunction, fp8: FP8Format, device: torch.device) -> None:
    """Before a loaded function runs: on the CPU its Triton kernels run only in the proven exact
    interpreter (compiled semantics, exact `fp8` conversion, interpreter.cpu_kernels), else
    ExactConversionError (a ProducerError, one line). The file's bound names follow the run's device (a
    workspace stand-in allocates there)."""
    if loaded.rebind is not None:
        loaded.rebind(fp8, device=device)
    if device.type != "cpu" or "triton" not in sys.modules:
        if loaded.uses_triton:
            require_triton_format(fp8, device)
        return
    from ..triton_cpu.known_answers import require_any_kernel

    if loaded.uses_triton:
        require_any_kernel(fp8)


def _cpu_check(loaded: LoadedFunction):
    def check(spec: CacheSpec, device: torch.device) -> None:
        prepare_to_run(loaded, spec.fp8, device)

    return check


def load_writer(text: str, *, fp8: FP8Format | None = None, repo: Path | None = None) -> Producer:
    """A Producer around a writer function from a file (see load_function)."""
    loaded = load_function(text, fp8=fp8, repo=repo)
    fn, func_name = loaded.fn, loaded.provenance["function"]
    try:
        signature = inspect.signature(fn)
        signature.bind(None, None, None, None, None)
    except (TypeError, ValueError):
        raise ProducerError(
            f"producer {text!r}: {func_name} must take (k, kv_cache, slot_mapping, quant_block_size,"
            f" scale_fmt), has {func_name}{inspect.signature(fn)}"
        ) from None
    keywords = frozenset(k for k in EXTRA_KEYWORDS if _accepts(signature.parameters, k))
    where = loaded.provenance["file"]
    if "commit" in loaded.provenance:
        where += f" at {loaded.provenance['revision']} ({loaded.provenance['commit'][:12]})"
    writer = fn
    if loaded.rebind is not None:  # vllm-file: FP8_DTYPE / current_platform follow each run's --fp8
        writer, keywords = _rebinding(fn, loaded.rebind, keywords), keywords | {"fp8_dtype"}
    return Producer(text, f"{func_name} from {where}", writer, keywords=keywords, provenance=loaded.provenance,
                    check=_cpu_check(loaded), triton=loaded.uses_triton)


def _rebinding(fn: Callable, rebind: Callable, keywords: frozenset[str]) -> Callable:
    def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype, **extra):
        rebind(FP8Format.from_torch_dtype(fp8_dtype), device=kv_cache.device)
        passed = {**extra, "fp8_dtype": fp8_dtype}
        fn(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, **{key: passed[key] for key in passed if key in keywords})

    return writer
