"""The one registry of producers, by role: a writer's or a reader's name (a built-in entry, or code a Name
points at, code/names.py) turned into a `Producer` or a `Reader` (core/producer.py); `run` runs a writer on a
fresh poisoned cache (readers run in readers.py).

Loaders import lazily: building the registry imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from dataclasses import dataclass
from enum import Enum
from typing import Callable

import torch

from ..core.cache import SKIP_PADDING, CacheBuffer, forget_slot, padded_slots, write_in_layer
from ..core.errors import CheckerError, ProducerError, failure, one_line
from ..core.inputs import Inputs, check_slots
from ..core.device import require_triton_format
from ..core.isolation import IsolatedError, Limits, phase, run_isolated
from ..code.names import CODE_KINDS, Kind, forms, parse
from ..core.spec import CacheSpec
from ..code.load import load_writer
from ..core.producer import EXTRA_KEYWORDS, Producer, Reader, reported_provenance

def always() -> tuple[bool, str]:
    """The availability of a built-in entry."""
    return True, "built in"


@dataclass(frozen=True)
class Entry:
    """One registry name: what it is, how to load it, whether it can run here (never raises). A writer's
    `load()` returns a Producer, a reader's `load(spec)` a Reader."""

    name: str
    description: str
    load: Callable[..., object]
    availability: Callable[[], tuple[bool, str]] = always


def _reference() -> Producer:
    from ..core.reference import AITER
    from .reference_device import writer  # PyTorch ops; on CUDA their proven Triton twin (reference_triton.py)

    return Producer("reference", AITER.description, writer, emulated=True, keywords=frozenset(EXTRA_KEYWORDS))


def _reference_vllm() -> Producer:
    from ..core.reference import VLLM, vllm_writer

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
    from ..core.spec import FP8Format
    from ..triton_cpu.known_answers import check

    ok, reason = check(FP8Format.E4M3FN)
    return ok, f"on the CPU only through the interpreter: {reason}"


def _adapter(module_name: str) -> tuple[Callable[[], Producer], Callable[[], tuple[bool, str]]]:
    """(loader, availability) of a real writer that may not be installed (producers/adapters/)."""

    def module():
        return importlib.import_module(f"{__package__}.adapters.{module_name}")

    return (lambda: module().producer()), (lambda: module().availability())


def _writers() -> dict[str, Entry]:
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


def _reference_reader(spec: CacheSpec) -> Reader:
    from .reader_reference import make_reader

    return Reader(REFERENCE, f"fp8check's exact reader (float64, reads the {spec.layout.value} layout)",
                  make_reader(spec), exact=True)


def _aiter_reader():
    return importlib.import_module(f"{__package__}.adapters.aiter_reader")


def _readers() -> dict[str, Entry]:
    entries = [
        Entry(REFERENCE, "fp8check's exact reader: decodes the bytes through the spec's layout, float64 math",
              _reference_reader),
        Entry("aiter", "ROCm aiter's deepgemm_fp8_paged_mqa_logits (Preshuffle=block_size > 1), as vLLM calls it",
              lambda spec: _aiter_reader().reader(spec), lambda: _aiter_reader().availability()),
    ]
    return {entry.name: entry for entry in entries}


class Role(Enum):
    WRITER = "writer"
    READER = "reader"


REFERENCE = "reference"
REGISTRY: dict[Role, dict[str, Entry]] = {Role.WRITER: _writers(), Role.READER: _readers()}
# Names of code from outside fp8check each role takes: untrusted, run in a child process unless --in-process.
KINDS = {Role.WRITER: (*CODE_KINDS, Kind.PRESET, Kind.AITER_SRC, Kind.VLLM_SRC),
         Role.READER: (*CODE_KINDS, Kind.PRESET, Kind.DEEPGEMM_SRC)}

# The default baseline: the real aiter op where it can run, its PyTorch emulation `reference` elsewhere.
AUTO = "auto"
DEFAULT_ISOLATION = Limits()


def names(role: Role = Role.WRITER) -> list[str]:
    return list(REGISTRY[role])


def _entry(name: str, role: Role, *extra: str) -> Entry:
    """The built-in entry of a name that can run here; ProducerError naming every known form otherwise."""
    entry = REGISTRY[role].get(name)
    if entry is None:
        raise ProducerError(f"unknown {'producer' if role is Role.WRITER else 'reader'} {name!r}; known:"
                            f" {', '.join([*names(role), *extra])}, {forms(*KINDS[role])}")
    ok, reason = entry.availability()
    if not ok:
        raise ProducerError(f"{'producer' if role is Role.WRITER else 'reader'} {name!r} is unavailable: {reason}")
    return entry


def available(name: str) -> tuple[bool, str]:
    """(ok, one-line reason) for a registry name."""
    entry = REGISTRY[Role.WRITER].get(name)
    if entry is None:
        return False, f"unknown producer {name!r}"
    return entry.availability()


def _auto() -> Producer:
    ok, reason = available("aiter")
    if ok:
        return REGISTRY[Role.WRITER]["aiter"].load()
    fallback = REGISTRY[Role.WRITER]["reference"].load()
    return dataclasses.replace(fallback, description=f"{fallback.description} (auto: aiter unavailable: {reason})")


def _not_here(*args, **kwargs) -> None:
    raise CheckerError("an isolated producer's code runs only in its child process")


def _preset(name: str, checkout) -> Producer:
    """`preset:PROJECT/NAME`, a writer a project table declares (projects/compose.py)."""
    from ..code.projects.compose import cpu_check, load, spec_check

    done = load(name, "writer", checkout=checkout)
    supported, exact = spec_check(name, "writer"), cpu_check(done.loaded)

    def check(spec, device) -> None:
        supported(spec, device)
        exact(spec, device)

    return Producer(name, f"{done.preset.description} from {done.loaded.origin.describe()}", done.fn,
                    keywords=frozenset(EXTRA_KEYWORDS), provenance=done.provenance, check=check,
                    triton=bool(done.loaded.kernels()))


def resolve(name: str, *, fp8=None, repo=None, isolation: Limits | None = DEFAULT_ISOLATION,
            allow_unpinned: bool = False) -> Producer:
    """The producer a name stands for: a registry name, `auto`, or code from a file (`file:`, `vllm-file:`,
    either with `git:REV:PATH` read from `repo`). `fp8` (an FP8Format) names the format vllm-file's
    platform names are reported bound to; a vllm-file writer is bound to each run's --fp8 either way.

    Code from files is not loaded here when `isolation` is given (the default): the Producer only names
    it, and `run` loads and runs it in a child process under those limits. `isolation=None` loads it
    into this process (`--in-process`, for debugging).

    Released code (`pkg:`, `aiter-src:pkg:`, a preset's release) passes the one hash rule first, here in
    the parent: a version no project table pins is refused unless `allow_unpinned` (released.admit)."""
    parsed = parse(name, error=ProducerError)
    if parsed.kind is Kind.VLLM_SRC:  # no nvcc or no NVIDIA GPU: NotRunnableHere before a child starts
        from .vllm_src import require_here

        require_here(parsed)
    if parsed.kind in KINDS[Role.WRITER]:
        from ..code.projects.pins import admit_release

        admit_release(parsed, repo=repo, allow_unpinned=allow_unpinned)
        if isolation is not None:
            from ..code.projects.compose import spec_check

            # what a preset's table declares is checked here, in the parent, before a child starts
            return Producer(name, f"{name} (run in a child process)", _not_here, isolation=isolation,
                            repo=None if repo is None else str(repo), check=spec_check(name, "writer"))
    if parsed.kind is Kind.PRESET:  # `repo`: a clone of the project's repository (--checkout)
        return _preset(name, repo)
    if parsed.kind in CODE_KINDS:
        return load_writer(name, fp8=fp8, repo=repo)
    if parsed.kind is Kind.AITER_SRC:
        from .aiter_src import load as load_aiter_source

        return load_aiter_source(parsed, fp8=fp8)
    if parsed.kind is Kind.VLLM_SRC:
        from .vllm_src import load as load_vllm_source

        return load_vllm_source(parsed)
    if name == AUTO:
        return _auto()
    return _entry(name, Role.WRITER, AUTO).load()


def _reader_from_code(text: str, spec: CacheSpec, repo=None) -> Reader:
    from ..code.load import load_function, prepare_to_run

    loaded = load_function(text, role="reader", fp8=spec.fp8, default_function=None, repo=repo)
    fn = loaded.fn
    fills = fills_output(fn)
    try:
        inspect.signature(fn).bind(None, None, None, None, None, None, **({"out": None} if fills else {}))
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
                  provenance=loaded.provenance, fills_output=fills)


def fills_output(fn) -> bool:
    """A reader whose signature has a keyword-only `out` fills a caller-made output buffer (aiter's kernel does)
    instead of returning logits: it is handed a guarded one (obligations.GuardedOutput)."""
    try:
        parameter = inspect.signature(fn).parameters.get("out")
    except (TypeError, ValueError):  # no Python signature: the vLLM signature
        return False
    return parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY


def _isolated_reader(*args, **kwargs) -> None:
    raise CheckerError("an isolated reader's code runs only in its child process")


def resolve_reader(name: str, *, spec: CacheSpec, repo=None, isolation: Limits | None = DEFAULT_ISOLATION,
                   allow_unpinned: bool = False) -> Reader:
    """The reader a name stands for, set up to read caches of `spec` (files may come from git in `repo`).

    A reader from a file is not loaded here when `isolation` is given (the default): the Reader only names
    it, and `readers.run_reader` loads and runs it in a child process under those limits (with the spec's FP8
    format and `repo`). `isolation=None` loads it into this process (`--in-process`, for debugging).
    Released code passes the one hash rule first, as writers do (resolve)."""
    parsed = parse(name, error=ProducerError)
    if parsed.kind is Kind.DEEPGEMM_SRC:  # no nvcc, GPU or checkout: NotRunnableHere before a child starts
        from .adapters.deepgemm_src import require_here

        require_here(parsed)
    if parsed.kind in KINDS[Role.READER]:
        from ..code.projects.pins import admit_release

        admit_release(parsed, repo=repo, allow_unpinned=allow_unpinned)
    if parsed.kind is Kind.PRESET:  # a spec its table declares unsupported: refused before anything runs
        from ..code.projects.compose import check_declared

        check_declared(name, "reader", spec)
    if parsed.kind in KINDS[Role.READER] and isolation is not None:
        return Reader(name, f"{name} (run in a child process)", _isolated_reader, isolation=isolation,
                      repo=None if repo is None else str(repo), spec=spec)
    if parsed.kind is Kind.PRESET:  # `repo`: a clone of the project's repository (--checkout)
        from ..code.projects.compose import cpu_check, load

        done = load(name, "reader", checkout=repo)
        done.loaded.rebind(spec.fp8, spec.layout)
        return Reader(name, f"{done.preset.description} from {done.loaded.origin.describe()}", done.fn,
                      check=cpu_check(done.loaded), provenance=done.provenance)
    if parsed.kind is Kind.DEEPGEMM_SRC:
        from .adapters.deepgemm_src import reader

        return reader(parsed, spec)
    if parsed.kind in KINDS[Role.READER]:
        return _reader_from_code(name, spec, repo)
    return _entry(name, Role.READER).load(spec)


def _write(producer: Producer, spec: CacheSpec, k: torch.Tensor, cache: torch.Tensor, slot_mapping: torch.Tensor,
           grids: list | None = None) -> None:
    """Call the writer; `grids` receives how each interpreted Triton grid ran (GridRun records)."""
    kwargs = {}
    if "fp8_dtype" in producer.keywords:
        kwargs["fp8_dtype"] = spec.fp8.torch_dtype()
    if "layout" in producer.keywords:
        kwargs["layout"] = spec.layout.value
    from ..triton_cpu.interpreter import scope_for

    try:
        with scope_for(cache.device, grid=producer.interpreter != "sequential") as ran:  # on CPU tensors: exact
            producer.writer(k, cache, slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg, **kwargs)
        if grids is not None:
            grids.extend(ran)
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
                 buffer: torch.Tensor, interpreter: str = "grid") -> dict:
    """The child's side of an isolated run (isolation.run_isolated target): load the producer by name,
    write the shared buffer, report where the code came from and whether it ran Triton kernels."""
    import json

    phase("loading")
    spec = CacheSpec.from_dict(json.loads(spec_json))
    producer = dataclasses.replace(resolve(name, fp8=spec.fp8, repo=repo, isolation=None, allow_unpinned=True),
                                   interpreter=interpreter)  # the parent admitted it
    producer.check(spec, buffer.device)
    phase("writing")
    grids: list = []
    write_in_layer(CacheBuffer(spec, buffer), lambda cache: _write(producer, spec, k, cache, slot_mapping, grids))
    return {"provenance": json.loads(json.dumps(with_grids(producer.provenance, grids), default=str)),
            "description": producer.description, "triton": bool(producer.triton)}


def with_grids(provenance: dict, grids: list) -> dict:
    """A side's provenance with how its interpreted Triton grids ran (`interpreter`: one line per grid, at
    once in N batches or sequentially and why), in the JSON's baseline_provenance / candidate_provenance."""
    if not grids:
        return provenance
    return {**provenance, "interpreter": "; ".join(run.note() for run in grids)[:1000]}


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
        producer.check(spec, device)  # the parent's own checks (a preset's declared specs), no code under test
        try:
            report = run_isolated(f"{__name__}:run_in_child", (producer.name, spec.to_json(), producer.repo, k,
                                  slot_mapping, buffer.buffer, producer.interpreter), limits=producer.isolation,
                                  label=f"producer {producer.name!r}")
        except IsolatedError as exc:
            if exc.not_here:  # a skip only where fp8check itself finds the format not runnable here
                require_triton_format(spec.fp8, device)
            raise
        producer = dataclasses.replace(
            producer, description=one_line(report.get("description", producer.description), 1000),
            provenance=reported_provenance(report.get("provenance")), triton=report.get("triton") is True)
    else:
        producer.check(spec, device)
        grids: list = []
        write_in_layer(buffer, lambda cache: _write(producer, spec, k, cache, slot_mapping, grids))
        if grids:
            producer = dataclasses.replace(producer, provenance=with_grids(producer.provenance, grids))
    changed = tuple(name for name, handed, passed in (("k", inputs.k, k), ("slot_mapping", given, slot_mapping))
                    if not _same_bytes(handed.contiguous(), passed))
    if pad_slot != SKIP_PADDING:
        forget_slot(buffer, pad_slot)
    return dataclasses.replace(buffer, modified_inputs=changed), producer


def run(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device) -> CacheBuffer:
    """run_producer's cache only."""
    return run_producer(producer, spec, inputs, device)[0]
