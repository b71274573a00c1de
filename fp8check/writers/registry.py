"""The writer registry: one frozen entry per name (description, loader, availability probe).

Loaders import lazily: building the registry imports nothing heavy. `resolve(name)` turns any
producer name into a `Producer` (writers/producer.py); `run` runs one on a fresh poisoned cache.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Callable

import torch

from ..cache import CacheBuffer
from ..errors import ProducerError, first_line
from ..inputs import Inputs
from ..spec import CacheSpec
from .producer import EXTRA_KEYWORDS, Producer

def _always() -> tuple[bool, str]:
    return True, "built in"


@dataclass(frozen=True)
class Entry:
    """One registry name: what it is, how to load it, whether it can run here (never raises)."""

    name: str
    description: str
    load: Callable[[], Producer]
    availability: Callable[[], tuple[bool, str]] = _always


def _reference() -> Producer:
    from .reference import AITER
    from .reference_device import writer  # PyTorch ops; on CUDA their proven Triton twin (reference_triton.py)

    return Producer("reference", AITER.description, writer, emulated=True, keywords=frozenset(EXTRA_KEYWORDS))


def _reference_vllm() -> Producer:
    from .reference import VLLM, vllm_writer

    return Producer("reference-vllm", VLLM.description, vllm_writer, emulated=True,
                    keywords=frozenset(EXTRA_KEYWORDS))


def _triton() -> Producer:
    from .triton import check, fixed_writer

    return Producer("triton", "Triton writer (vLLM ROCm semantics), value region viewed as FP8", fixed_writer,
                    check=check, keywords=frozenset(EXTRA_KEYWORDS), triton=True)


def _triton_buggy() -> Producer:
    from .triton import buggy_writer, check

    return Producer("triton-buggy", "Triton writer, the seed's buggy wrapper: value region passed as uint8",
                    buggy_writer, check=check, keywords=frozenset(EXTRA_KEYWORDS), triton=True)


def _triton_availability() -> tuple[bool, str]:
    try:
        import triton
    except ImportError as exc:
        return False, f"triton is not importable ({exc})"
    if torch.cuda.is_available():
        return True, f"compiled by Triton {triton.__version__} on {torch.cuda.get_device_name()}"
    from ..spec import FP8Format
    from .interpreter import check

    ok, reason = check(FP8Format.E4M3FN)
    return ok, f"on the CPU only through the interpreter: {reason}"


def _adapter(module_name: str) -> tuple[Callable[[], Producer], Callable[[], tuple[bool, str]]]:
    """(loader, availability) of a real writer that may not be installed (writers/adapters/)."""

    def module():
        return importlib.import_module(f"{__package__}.adapters.{module_name}")

    return (lambda: module().producer()), (lambda: module().availability())


def _entries() -> dict[str, Entry]:
    entries = [
        Entry("reference", "PyTorch emulation of aiter's C++ op + shuffle_weight", _reference),
        Entry("reference-vllm", "PyTorch emulation of vLLM's writer numerics (DIV 448/224, x / s)", _reference_vllm),
        Entry("triton", "Triton writer with vLLM ROCm semantics, fixed wrapper (FP8 view)", _triton,
              _triton_availability),
        Entry("triton-buggy", "Triton writer, buggy wrapper (uint8 slice: integer conversion)", _triton_buggy,
              _triton_availability),
        Entry("aiter", "ROCm aiter's C++ op indexer_k_quant_and_cache (preshuffle, or row-major + shuffle_weight)",
              *_adapter("aiter")),
        Entry("vllm-triton", "vLLM's Triton writer indexer_k_quant_and_cache_triton (installed vLLM)",
              *_adapter("vllm_triton")),
        Entry("vllm-cuda", "vLLM's C++ op torch.ops._C_cache_ops.indexer_k_quant_and_cache (row-major)",
              *_adapter("vllm_cuda")),
    ]
    return {entry.name: entry for entry in entries}


REGISTRY: dict[str, Entry] = _entries()

# The default baseline: the real aiter op where it can run, its PyTorch emulation `reference` elsewhere.
AUTO = "auto"


def names() -> list[str]:
    return list(REGISTRY)


def available(name: str) -> tuple[bool, str]:
    """(ok, one-line reason) for a registry name."""
    entry = REGISTRY.get(name)
    if entry is None:
        return False, f"unknown producer {name!r}"
    return entry.availability()


def _auto() -> Producer:
    ok, reason = available("aiter")
    if ok:
        return REGISTRY["aiter"].load()
    fallback = REGISTRY["reference"].load()
    return dataclasses.replace(fallback, description=f"{fallback.description} (auto: aiter unavailable: {reason})")


def prepare(device: torch.device) -> None:
    """Call before any producer is resolved: a CPU run turns Triton's interpreter mode on while Triton is
    not yet imported (every Triton kernel then runs in the exact interpreter, writers/interpreter.py)."""
    if device.type == "cpu":
        from .interpreter import prepare_cpu

        prepare_cpu()


def resolve(name: str, *, fp8=None, repo=None) -> Producer:
    """The producer a name stands for: a registry name, `auto`, or code from a file (`file:`, `vllm-file:`,
    either with `git:REV:PATH` read from `repo`). `fp8` (an FP8Format) names the format vllm-file's
    platform names are reported bound to; a vllm-file writer is bound to each run's --fp8 either way."""
    from .files import FILE_PREFIX, VLLM_FILE_PREFIX, load_writer

    if name.startswith((FILE_PREFIX, VLLM_FILE_PREFIX)):
        return load_writer(name, fp8=fp8, repo=repo)
    if name == AUTO:
        return _auto()
    entry = REGISTRY.get(name)
    if entry is None:
        raise ProducerError(f"unknown producer {name!r}; known: {', '.join(names())}, {AUTO}, file:PATH:FUNC,"
                            " vllm-file:PATH[:FUNC]")
    ok, reason = entry.availability()
    if not ok:
        raise ProducerError(f"producer {name!r} is unavailable: {reason}")
    return entry.load()


def run(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device) -> CacheBuffer:
    """A fresh poisoned cache written by the producer. The inputs are cloned: they are never modified."""
    producer.check(spec, device)
    buffer = CacheBuffer.allocate(spec, device)
    kwargs = {}
    if "fp8_dtype" in producer.keywords:
        kwargs["fp8_dtype"] = spec.fp8.torch_dtype()
    if "layout" in producer.keywords:
        kwargs["layout"] = spec.layout.value
    try:
        producer.writer(
            inputs.k.clone(), buffer.cache, inputs.slot_mapping.clone(), spec.quant_block_size,
            spec.scale_fmt.writer_arg, **kwargs,
        )
        if buffer.buffer.is_cuda:
            torch.cuda.synchronize(buffer.buffer.device)
    except ProducerError:
        raise
    except Exception as exc:
        raise ProducerError(f"producer {producer.name!r} raised {first_line(exc)}") from exc
    return buffer
