"""The writer registry: one frozen entry per name (description, loader, availability probe).

A writer is `fn(k, kv_cache, slot_mapping, quant_block_size, scale_fmt)` writing the uint8 cache
`[num_blocks, block_size, head_dim + 4*head_dim/qbs]` in place. A `Producer` is a loaded writer with
what the runner needs to know about it: whether it is an emulation, what it checks before running,
which of the optional keywords `fp8_dtype` / `layout` it takes, and where its code came from.
Loaders import lazily: building the registry imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..cache import CacheBuffer
from ..errors import CheckerError, ProducerError, first_line
from ..inputs import Inputs, check_slots
from ..isolation import Limits, phase, run_isolated
from ..spec import CacheSpec

Writer = Callable[..., None]
Check = Callable[[CacheSpec, torch.device], None]
EXTRA_KEYWORDS = ("fp8_dtype", "layout")  # optional keywords a writer may accept


def _no_check(spec: CacheSpec, device: torch.device) -> None:
    return None


@dataclass(frozen=True)
class Producer:
    name: str
    description: str
    writer: Writer
    emulated: bool = False  # a PyTorch emulation of a writer that is not itself running
    check: Check = _no_check  # raises ProducerError when this spec cannot run on this device
    keywords: frozenset[str] = frozenset()  # the subset of EXTRA_KEYWORDS the writer accepts
    provenance: dict = field(default_factory=dict)  # file, function, revision, sha256 of code from files
    # Run in a child process under these limits (code from files); None: in this process. An isolated
    # Producer holds no code: the child loads it by `name`, and fills `provenance` in when it has.
    isolation: Limits | None = None


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
    from .reference import AITER, aiter_writer

    return Producer("reference", AITER.description, aiter_writer, emulated=True, keywords=frozenset(EXTRA_KEYWORDS))


def _reference_vllm() -> Producer:
    from .reference import VLLM, vllm_writer

    return Producer("reference-vllm", VLLM.description, vllm_writer, emulated=True,
                    keywords=frozenset(EXTRA_KEYWORDS))


def _triton() -> Producer:
    from .triton import check, fixed_writer

    return Producer("triton", "Triton writer (vLLM ROCm semantics), value region viewed as FP8", fixed_writer,
                    check=check, keywords=frozenset(EXTRA_KEYWORDS))


def _triton_buggy() -> Producer:
    from .triton import buggy_writer, check

    return Producer("triton-buggy", "Triton writer, the seed's buggy wrapper: value region passed as uint8",
                    buggy_writer, check=check, keywords=frozenset(EXTRA_KEYWORDS))


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
FILE_PREFIX = "file:"
# Names whose code comes from the user's files: untrusted, run in a child process unless --in-process.
UNTRUSTED_PREFIXES = (FILE_PREFIX, "vllm-file:", "git:")
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


def resolve(name: str, *, isolation: Limits | None = DEFAULT_ISOLATION) -> Producer:
    """The producer a name stands for: a registry name, `auto`, or code from a file.

    Code from files is not loaded here when `isolation` is given (the default): the Producer only names
    it, and `run` loads and runs it in a child process under those limits. `isolation=None` loads it
    into this process (`--in-process`, for debugging)."""
    if untrusted(name) and isolation is not None:
        return Producer(name, f"{name} (run in a child process)", _not_here, isolation=isolation)
    if name.startswith(FILE_PREFIX):
        from .files import load_writer

        return load_writer(name)
    if name == AUTO:
        return _auto()
    entry = REGISTRY.get(name)
    if entry is None:
        raise ProducerError(f"unknown producer {name!r}; known: {', '.join(names())}, {AUTO}, file:PATH:FUNC")
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
    try:
        producer.writer(k, cache, slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg, **kwargs)
        if cache.is_cuda:
            torch.cuda.synchronize(cache.device)
    except ProducerError:
        raise
    except Exception as exc:
        raise ProducerError(f"producer {producer.name!r} raised {first_line(exc)}") from exc


def run_in_child(name: str, spec_json: str, k: torch.Tensor, slot_mapping: torch.Tensor,
                 buffer: torch.Tensor) -> dict:
    """The child's side of an isolated run (isolation.run_isolated target): load the producer by name,
    write the shared buffer, report where the code came from."""
    import json

    phase("loading")
    spec = CacheSpec.from_dict(json.loads(spec_json))
    producer = resolve(name, isolation=None)
    producer.check(spec, buffer.device)
    phase("writing")
    _write(producer, spec, k, CacheBuffer(spec, buffer).cache, slot_mapping)
    return {"provenance": {str(key): str(value) for key, value in producer.provenance.items()},
            "description": producer.description}


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN payloads included), for tensors a producer may have re-shaped or re-typed."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def run(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device) -> CacheBuffer:
    """A fresh poisoned cache written by the producer, on clones of the inputs (never modified); clones
    the producer changed in place are named in `modified_inputs`. The slots are checked first: nothing
    runs on slots outside the cache, duplicated or all padding."""
    check_slots(spec, inputs.slot_mapping, inputs.source)
    buffer = CacheBuffer.allocate(spec, device)
    k, slot_mapping = inputs.k.clone(), inputs.slot_mapping.clone()
    if producer.isolation is not None:
        report = run_isolated(f"{__name__}:run_in_child", (producer.name, spec.to_json(), k, slot_mapping,
                              buffer.buffer), limits=producer.isolation, label=f"producer {producer.name!r}")
        provenance = report.get("provenance")
        if isinstance(provenance, dict):
            producer.provenance.update({str(key): str(value)[:1000] for key, value in provenance.items()})
    else:
        producer.check(spec, device)
        _write(producer, spec, k, buffer.cache, slot_mapping)
    changed = tuple(name for name, given, passed in (("k", inputs.k, k), ("slot_mapping", inputs.slot_mapping,
                    slot_mapping)) if not _same_bytes(given.contiguous(), passed))
    return dataclasses.replace(buffer, modified_inputs=changed)
