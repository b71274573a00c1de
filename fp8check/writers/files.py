"""Writers (and later readers) taken from the user's own Python files: `file:PATH:FUNC`.

Signature inspection happens once, here, at load time: the Producer records which optional
keywords the function takes, so the runner never sniffs signatures.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import ProducerError, first_line
from .producer import EXTRA_KEYWORDS, Producer

FILE_PREFIX = "file:"


def _accepts(params, keyword: str) -> bool:
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def import_file(path: Path, label: str, role: str = "producer"):
    """Execute the Python file `path` as a fresh module; its failures become one ProducerError line."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    module_name = f"fp8check_plugin_{digest}"
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the plugin's own code failed: name it, keep the cause for --debug
        raise ProducerError(f"{role} {label!r}: {path} failed to import: {first_line(exc)}") from exc
    return module


@dataclass(frozen=True)
class LoadedFunction:
    """A function taken from a user's file, with what was checked: the text given, and its provenance
    (file, function, sha256 of the source that ran; later also git revision/commit and bound names)."""

    fn: Callable
    label: str
    provenance: dict


def load_function(text: str, *, role: str = "producer") -> LoadedFunction:
    """`file:PATH:FUNC` -> FUNC of the Python file PATH. `role` names the thing in error messages."""
    body = text[len(FILE_PREFIX):]
    path_text, sep, func_name = body.rpartition(":")
    if not sep or not path_text or not func_name:
        raise ProducerError(f"{role} {text!r}: expected file:PATH:FUNC")
    path = Path(path_text)
    if not path.is_file():
        raise ProducerError(f"{role} {text!r}: {path} is not a file")
    module = import_file(path, text, role)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise ProducerError(f"{role} {text!r}: {path} has no function {func_name!r}")
    provenance = {"file": str(path), "function": func_name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    return LoadedFunction(fn, text, provenance)


def load_writer(text: str) -> Producer:
    """A Producer around a writer function from a file (see load_function)."""
    loaded = load_function(text)
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
    return Producer(text, f"{func_name} from {loaded.provenance['file']}", fn, keywords=keywords,
                    provenance=loaded.provenance)
