"""The reader registry: one frozen entry per name, plus readers from files, and the one place readers run.

A reader has vLLM's signature (SPEC.md section 7):
`fn(q_fp8 [B, next_n, H, D], kv_cache uint8 [num_blocks, block_size, 1, D + 4*D/qbs], weights fp32
[B*next_n, H], context_lens int32 [B], block_tables int32 [B, max_blocks], max_model_len)
-> logits [B*next_n, max_model_len]`.
Every reader call goes through `run_reader`, so a reader never touches fp8check's own tensors and its
failures are one-line ProducerErrors, never a verdict.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..errors import ProducerError, first_line
from ..spec import CacheSpec

ReaderFn = Callable[..., torch.Tensor]
Check = Callable[[CacheSpec, torch.device], None]
FILE_PREFIX = "file:"
VLLM_FILE_PREFIX = "vllm-file:"
REFERENCE = "reference"


def _no_check(spec: CacheSpec, device: torch.device) -> None:
    return None


@dataclass(frozen=True)
class Reader:
    name: str
    description: str
    fn: ReaderFn
    exact: bool = False  # fp8check's own float64 reader: on the baseline's bytes it IS the truth
    check: Check = _no_check  # raises ProducerError when this spec cannot be read on this device
    provenance: dict = field(default_factory=dict)


def _always() -> tuple[bool, str]:
    return True, "built in"


@dataclass(frozen=True)
class Entry:
    """One registry name: what it is, how to load it for a spec, whether it can run here (never raises)."""

    name: str
    description: str
    load: Callable[[CacheSpec], Reader]
    availability: Callable[[], tuple[bool, str]] = _always


def _reference(spec: CacheSpec) -> Reader:
    from .reference import make_reader

    return Reader(REFERENCE, f"fp8check's exact reader (float64, reads the {spec.layout.value} layout)",
                  make_reader(spec), exact=True)


def _aiter_module():
    return importlib.import_module(f"{__package__}.aiter")


def _entries() -> dict[str, Entry]:
    entries = [
        Entry(REFERENCE, "fp8check's exact reader: decodes the bytes through the spec's layout, float64 math",
              _reference),
        Entry("aiter", "ROCm aiter's deepgemm_fp8_paged_mqa_logits (Preshuffle=block_size > 1), as vLLM calls it",
              lambda spec: _aiter_module().reader(spec), lambda: _aiter_module().availability()),
    ]
    return {entry.name: entry for entry in entries}


REGISTRY: dict[str, Entry] = _entries()


def names() -> list[str]:
    return list(REGISTRY)


def _from_file(text: str, spec: CacheSpec, repo=None) -> Reader:
    from ..writers.files import load_function, prepare_to_run

    loaded = load_function(text, role="reader", fp8=spec.fp8, default_function=None, repo=repo)
    fn = loaded.fn
    try:
        inspect.signature(fn).bind(None, None, None, None, None, None)
    except TypeError:
        raise ProducerError(
            f"reader {text!r}: {loaded.provenance.get('function', 'the function')} must take (q_fp8, kv_cache,"
            f" weights, context_lens, block_tables, max_model_len), has {inspect.signature(fn)}"
        ) from None
    except ValueError:  # no Python signature (a compiled function): let the call decide
        pass

    def check(spec: CacheSpec, device: torch.device) -> None:  # its Triton kernels: exact interpreter on the CPU
        prepare_to_run(loaded, spec.fp8, device)

    where = loaded.provenance.get("file", text)
    return Reader(text, f"{loaded.provenance.get('function', text)} from {where}", fn, check=check,
                  provenance=loaded.provenance)


def resolve(name: str, *, spec: CacheSpec, repo=None, isolation=None) -> Reader:  # isolated readers: see run_reader
    """The reader a name stands for, set up to read caches of `spec` (files may come from git in `repo`)."""
    if name.startswith((FILE_PREFIX, VLLM_FILE_PREFIX)):
        return _from_file(name, spec, repo)
    entry = REGISTRY.get(name)
    if entry is None:
        raise ProducerError(
            f"unknown reader {name!r}; known: {', '.join(names())}, file:PATH:FUNC, vllm-file:PATH:FUNC"
        )
    ok, reason = entry.availability()
    if not ok:
        raise ProducerError(f"reader {name!r} is unavailable: {reason}")
    return entry.load(spec)


def _checked_output(reader: Reader, logits, rows: int, max_model_len: int, device: torch.device) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor):
        raise ProducerError(f"reader {reader.name!r} returned {type(logits).__name__}, not a tensor of logits")
    if tuple(logits.shape) != (rows, max_model_len) or not logits.dtype.is_floating_point:
        raise ProducerError(
            f"reader {reader.name!r} returned {logits.dtype} {list(logits.shape)}; expected floating-point"
            f" [B*next_n, max_model_len] = [{rows}, {max_model_len}]"
        )
    if logits.device != device:
        raise ProducerError(f"reader {reader.name!r} returned logits on {logits.device}, its inputs were on {device}")
    return logits


def run_reader(reader: Reader, q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
               context_lens: torch.Tensor, block_tables: torch.Tensor, max_model_len: int) -> torch.Tensor:
    """The one place a reader runs: on copies of the tensors (fp8check's stay untouched), its failures and
    malformed results turned into one-line ProducerErrors. Returns logits [B*next_n, max_model_len]."""
    device = kv_cache.device
    args = [t.clone() for t in (q_fp8, kv_cache, weights, context_lens, block_tables)]
    try:
        logits = reader.fn(*args, max_model_len)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except ProducerError:
        raise
    except Exception as exc:
        raise ProducerError(f"reader {reader.name!r} raised {first_line(exc)}") from exc
    rows = q_fp8.shape[0] * q_fp8.shape[1]
    return _checked_output(reader, logits, rows, max_model_len, device)
