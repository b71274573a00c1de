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

from ..cache import SKIP_PADDING, CacheBuffer, forget_slot, padded_slots, write_in_layer
from ..errors import CheckerError, ProducerError, failure, one_line
from ..inputs import Inputs, check_slots
from ..isolation import Limits, phase, run_isolated
from ..sources import AITER_SRC_PREFIX, FILE_PREFIX, GIT_PREFIX, PKG_PREFIX, PRESET_PREFIX, VLLM_FILE_PREFIX
from ..spec import CacheSpec
from .files import load_writer
from .producer import EXTRA_KEYWORDS, Producer, reported_provenance

def always() -> tuple[bool, str]:
    """The availability of a built-in entry."""
    return True, "built in"


@dataclass(frozen=True)
class Entry:
    """One registry name: what it is, how to load it, whether it can run here (never raises). The writer
    registry's `load()` returns a Producer; the reader registry's (readers/registry.py) `load(spec)` a
    Reader."""

    name: str
    description: str
    load: Callable[..., object]
    availability: Callable[[], tuple[bool, str]] = always


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
# Names whose code comes from the user's files: untrusted, run in a child process unless --in-process.
UNTRUSTED_PREFIXES = (FILE_PREFIX, VLLM_FILE_PREFIX, GIT_PREFIX, PKG_PREFIX, PRESET_PREFIX, AITER_SRC_PREFIX)
DEFAULT_ISOLATION = Limits()


def untrusted(name: str) -> bool:
    return name.startswith(UNTRUSTED_PREFIXES)


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


def _not_here(*args, **kwargs) -> None:
    raise CheckerError("an isolated producer's code runs only in its child process")


def _preset(name: str, checkout) -> Producer:
    """`preset:PROJECT/NAME`, a writer a project table declares (projects/compose.py)."""
    from .projects.compose import cpu_check, load

    done = load(name, "writer", checkout=checkout)
    return Producer(name, f"{done.preset.description} from {done.loaded.origin.describe()}", done.fn,
                    keywords=frozenset(EXTRA_KEYWORDS), provenance=done.provenance, check=cpu_check(done.loaded),
                    triton=bool(done.loaded.kernels()))


def resolve(name: str, *, fp8=None, repo=None, isolation: Limits | None = DEFAULT_ISOLATION) -> Producer:
    """The producer a name stands for: a registry name, `auto`, or code from a file (`file:`, `vllm-file:`,
    either with `git:REV:PATH` read from `repo`). `fp8` (an FP8Format) names the format vllm-file's
    platform names are reported bound to; a vllm-file writer is bound to each run's --fp8 either way.

    Code from files is not loaded here when `isolation` is given (the default): the Producer only names
    it, and `run` loads and runs it in a child process under those limits. `isolation=None` loads it
    into this process (`--in-process`, for debugging)."""
    if untrusted(name) and isolation is not None:
        return Producer(name, f"{name} (run in a child process)", _not_here, isolation=isolation,
                        repo=None if repo is None else str(repo))
    if name.startswith(PRESET_PREFIX):  # `repo`: a clone of the project's repository (--checkout)
        return _preset(name, repo)
    if name.startswith((FILE_PREFIX, VLLM_FILE_PREFIX, PKG_PREFIX)):
        return load_writer(name, fp8=fp8, repo=repo)
    if name.startswith(AITER_SRC_PREFIX):
        from .aiter_cpu.producer import load as load_aiter_source

        return load_aiter_source(name, fp8=fp8)
    if name == AUTO:
        return _auto()
    entry = REGISTRY.get(name)
    if entry is None:
        raise ProducerError(f"unknown producer {name!r}; known: {', '.join(names())}, {AUTO}, file:PATH:FUNC,"
                            " vllm-file:PATH[:FUNC], aiter-src:PATH")
    ok, reason = entry.availability()
    if not ok:
        raise ProducerError(f"producer {name!r} is unavailable: {reason}")
    return entry.load()


def _write(producer: Producer, spec: CacheSpec, k: torch.Tensor, cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    kwargs = {}
    if "fp8_dtype" in producer.keywords:
        kwargs["fp8_dtype"] = spec.fp8.torch_dtype()
    if "layout" in producer.keywords:
        kwargs["layout"] = spec.layout.value
    from .interpreter import scope_for

    try:
        with scope_for(cache.device):  # Triton kernels on CPU tensors: the exact interpreter
            producer.writer(k, cache, slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg, **kwargs)
        if cache.is_cuda:
            torch.cuda.synchronize(cache.device)
    except ProducerError:
        raise
    except Exception as exc:
        from .casts import fp8_integer_cast

        cast = fp8_integer_cast(exc)
        if cast is not None:
            raise ProducerError(f"producer {producer.name!r}: {cast}") from exc
        raise ProducerError(f"producer {producer.name!r} raised {failure(exc)}") from exc


def run_in_child(name: str, spec_json: str, repo: str | None, k: torch.Tensor, slot_mapping: torch.Tensor,
                 buffer: torch.Tensor) -> dict:
    """The child's side of an isolated run (isolation.run_isolated target): load the producer by name,
    write the shared buffer, report where the code came from and whether it ran Triton kernels."""
    import json

    phase("loading")
    spec = CacheSpec.from_dict(json.loads(spec_json))
    producer = resolve(name, fp8=spec.fp8, repo=repo, isolation=None)
    producer.check(spec, buffer.device)
    phase("writing")
    write_in_layer(CacheBuffer(spec, buffer), lambda cache: _write(producer, spec, k, cache, slot_mapping))
    return {"provenance": json.loads(json.dumps(producer.provenance, default=str)),
            "description": producer.description, "triton": bool(producer.triton)}


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN payloads included), for tensors a producer may have re-shaped or re-typed."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def run_producer(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device,
                 pad_slot: int = SKIP_PADDING) -> tuple[CacheBuffer, Producer]:
    """A fresh poisoned cache written by the producer, on clones of the inputs (never modified); clones
    the producer changed in place are named in `modified_inputs`. The slots are checked first: nothing
    runs on slots outside the cache, duplicated or all padding. Returns the producer as it ran: for an
    isolated one, with what its child reported (description, provenance, whether it ran Triton).
    pad_slot >= 0: the producer gets its padding (slot -1) sent to that dummy slot, whose bytes are then put
    back to poison (cache.forget_slot): SGLang's convention."""
    check_slots(spec, inputs.slot_mapping, inputs.source)
    buffer = CacheBuffer.allocate(spec, device)
    given = padded_slots(inputs.slot_mapping, pad_slot)
    k, slot_mapping = inputs.k.clone(), given.clone()
    if producer.isolation is not None:
        report = run_isolated(f"{__name__}:run_in_child", (producer.name, spec.to_json(), producer.repo, k,
                              slot_mapping, buffer.buffer), limits=producer.isolation,
                              label=f"producer {producer.name!r}")
        producer = dataclasses.replace(
            producer, description=one_line(report.get("description", producer.description), 1000),
            provenance=reported_provenance(report.get("provenance")), triton=report.get("triton") is True)
    else:
        producer.check(spec, device)
        write_in_layer(buffer, lambda cache: _write(producer, spec, k, cache, slot_mapping))
    changed = tuple(name for name, handed, passed in (("k", inputs.k, k), ("slot_mapping", given, slot_mapping))
                    if not _same_bytes(handed.contiguous(), passed))
    if pad_slot != SKIP_PADDING:
        forget_slot(buffer, pad_slot)
    return dataclasses.replace(buffer, modified_inputs=changed), producer


def run(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device) -> CacheBuffer:
    """run_producer's cache only."""
    return run_producer(producer, spec, inputs, device)[0]
