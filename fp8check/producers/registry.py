"""The one registry of producers, by role: a writer's or a reader's name (a built-in entry, or code a Name
points at, code/names.py) turned into a `Producer` or a `Reader`; `run` runs a writer on a fresh poisoned
cache (readers run in readers.py). Entries import lazily: building the registry imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Callable

import torch

from ..code.load import load_function, load_writer, prepare_to_run
from ..code.names import CODE_KINDS, Kind, forms, parse
from ..code.projects.table import admit_release
from ..core.cache import SKIP_PADDING, CacheBuffer, forget_slot, guarded_inputs, padded_slots, write_in_layer
from ..core.device import require_triton_format
from ..core.errors import CheckerError, ProducerError, failure, one_line
from ..core.inputs import Inputs, check_slots
from ..core.isolation import IsolatedError, Limits, exited, phase, run_isolated
from ..core.producer import EXTRA_KEYWORDS, Producer, Reader, reported_provenance
from ..core.spec import CacheSpec, FP8Format


@dataclass(frozen=True)
class Entry:
    """One registry name: what it is, how to load it (a writer's `load()`, a reader's `load(spec)`), whether
    it can run here (never raises)."""

    name: str
    description: str
    load: Callable[..., object]
    availability: Callable[[], tuple[bool, str]] = lambda: (True, "built in")


def _reference() -> Producer:
    from ..core.reference import AITER
    from .reference_device import writer  # PyTorch ops; on CUDA their proven Triton twin
    return Producer("reference", AITER.description, writer, emulated=True, keywords=frozenset(EXTRA_KEYWORDS))


def _reference_vllm() -> Producer:
    from ..core.reference import VLLM, vllm_writer
    return Producer("reference-vllm", VLLM.description, vllm_writer, emulated=True, keywords=frozenset(EXTRA_KEYWORDS))


def _triton(name: str, description: str, writer: str) -> Callable[[], Producer]:
    def load() -> Producer:
        from . import triton
        return Producer(name, description, getattr(triton, writer), check=triton.check,
                        keywords=frozenset(EXTRA_KEYWORDS), triton=True)

    return load


def _triton_availability() -> tuple[bool, str]:
    try:
        import triton
    except ImportError as exc:
        return False, f"triton is not importable ({exc})"
    if torch.cuda.is_available():
        return True, f"compiled by Triton {triton.__version__} on {torch.cuda.get_device_name()}"
    from ..triton_cpu.known_answers import check
    ok, reason = check(FP8Format.E4M3FN)
    return ok, f"on the CPU only through the interpreter: {reason}"


def _adapter(module_name: str, make: str = "producer") -> tuple[Callable, Callable[[], tuple[bool, str]]]:
    """(loader, availability) of a real writer or reader that may not be installed (producers/adapters/)."""
    def module():
        return importlib.import_module(f"{__package__}.adapters.{module_name}")
    return (lambda *spec: getattr(module(), make)(*spec)), (lambda: module().availability())


def _reference_reader(spec: CacheSpec) -> Reader:
    from .reader_reference import make_reader
    return Reader(REFERENCE, f"fp8check's exact reader (float64, reads the {spec.layout.value} layout)",
                  make_reader(spec), exact=True)


class Role(Enum):
    WRITER = "writer"
    READER = "reader"


REFERENCE = "reference"
REGISTRY: dict[Role, dict[str, Entry]] = {role: {e.name: e for e in entries} for role, entries in (
    (Role.WRITER, [
        Entry("reference", "PyTorch emulation of aiter's C++ op + shuffle_weight", _reference),
        Entry("reference-vllm", "PyTorch emulation of vLLM's writer numerics (DIV 448/224, x / s)", _reference_vllm),
        Entry("triton", "Triton writer with vLLM ROCm semantics, fixed wrapper (FP8 view)",
              _triton("triton", "Triton writer (vLLM ROCm semantics), value region viewed as FP8", "fixed_writer"),
              _triton_availability),
        Entry("triton-buggy", "Triton writer, buggy wrapper (uint8 slice: integer conversion)",
              _triton("triton-buggy", "Triton writer, the seed's buggy wrapper: value region passed as uint8",
                      "buggy_writer"), _triton_availability),
        Entry("aiter", "ROCm aiter's C++ op indexer_k_quant_and_cache (preshuffle, or row-major + shuffle_weight)",
              *_adapter("aiter")),
        Entry("vllm-triton", "vLLM's Triton writer indexer_k_quant_and_cache_triton (installed vLLM)",
              *_adapter("vllm_triton")),
        Entry("vllm-cuda", "vLLM's C++ op torch.ops._C_cache_ops.indexer_k_quant_and_cache (row-major)",
              *_adapter("vllm_cuda")),
    ]),
    (Role.READER, [
        Entry(REFERENCE, "fp8check's exact reader: decodes the bytes through the spec's layout, float64 math",
              _reference_reader),
        Entry("aiter", "ROCm aiter's deepgemm_fp8_paged_mqa_logits (Preshuffle=block_size > 1), as vLLM calls it",
              *_adapter("aiter_reader", "reader")),
    ]))}
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
    what = "producer" if role is Role.WRITER else "reader"
    if entry is None:
        raise ProducerError(f"unknown {what} {name!r}; known: {', '.join([*names(role), *extra])},"
                            f" {forms(*KINDS[role])}")
    ok, reason = entry.availability()
    if not ok:
        raise ProducerError(f"{what} {name!r} is unavailable: {reason}")
    return entry


def available(name: str) -> tuple[bool, str]:
    """(ok, one-line reason) for a registry name."""
    entry = REGISTRY[Role.WRITER].get(name)
    return entry.availability() if entry is not None else (False, f"unknown producer {name!r}")


def _auto() -> Producer:
    ok, reason = available("aiter")
    if ok:
        return REGISTRY[Role.WRITER]["aiter"].load()
    fallback = REGISTRY[Role.WRITER]["reference"].load()
    return dataclasses.replace(fallback, description=f"{fallback.description} (auto: aiter unavailable: {reason})")


def _in_child_only(*args, **kwargs) -> None:
    raise CheckerError("isolated code runs only in its child process")


def _declared(name: str, role: str) -> Callable[[CacheSpec, torch.device], None]:
    """What a preset's table declares, checked in the parent before anything is fetched or a child starts."""
    from ..code.projects.compose import check_declared
    return lambda spec, device: check_declared(name, role, spec)


def resolve(name: str, *, fp8=None, repo=None, isolation: Limits | None = DEFAULT_ISOLATION,
            allow_unpinned: bool = False) -> Producer:
    """The producer a name stands for: a registry name, `auto`, or code (KINDS; `git:REV:PATH` read from
    `repo`, a preset's clone). `fp8` names the format vllm-file's platform names are reported bound to; the
    writer is bound to each run's --fp8 either way. With `isolation` (the default) code is only named here,
    and `run` loads and runs it in a child process under those limits; `isolation=None` (`--in-process`)
    loads it here. Released code passes the one hash rule first, in the parent (table.admit_release)."""
    parsed = parse(name, error=ProducerError)
    if parsed.kind is Kind.VLLM_SRC:  # no nvcc or no NVIDIA GPU: NotRunnableHere before a child starts
        from .vllm_src import require_here
        require_here(parsed)
    if parsed.kind in KINDS[Role.WRITER]:
        admit_release(parsed, repo=repo, allow_unpinned=allow_unpinned)
        if isolation is not None:
            return Producer(name, f"{name} (run in a child process)", _in_child_only, isolation=isolation,
                            repo=None if repo is None else str(repo), check=_declared(name, "writer"))
    if parsed.kind is Kind.PRESET:  # `repo`: a clone of the project's repository (--checkout)
        from ..code.projects.compose import load
        done, declared = load(name, "writer", checkout=repo), _declared(name, "writer")

        def check(spec, device) -> None:
            declared(spec, device)
            prepare_to_run(done, spec.fp8, device)

        return Producer(name, done.description, done.fn, keywords=frozenset(EXTRA_KEYWORDS),
                        provenance=done.provenance, check=check, triton=done.uses_triton)
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
    loaded = load_function(text, role="reader", fp8=spec.fp8, default_function=None, repo=repo)
    fn, function = loaded.fn, loaded.provenance.get("function", text)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no Python signature (a compiled function): the vLLM signature, the call decides
        signature = None
    # a keyword-only `out`: it fills a caller-made output buffer (aiter's kernel does), a guarded one
    out = signature.parameters.get("out") if signature else None
    fills = out is not None and out.kind is inspect.Parameter.KEYWORD_ONLY
    try:
        if signature is not None:
            signature.bind(None, None, None, None, None, None, **({"out": None} if fills else {}))
    except TypeError:
        raise ProducerError(f"reader {text!r}: {loaded.provenance.get('function', 'the function')} must take"
                            " (q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len), has"
                            f" {signature}") from None
    return Reader(text, f"{function} from {loaded.provenance.get('file', text)}", fn,
                  check=lambda spec, device: prepare_to_run(loaded, spec.fp8, device),
                  provenance=loaded.provenance, fills_output=fills)


def resolve_reader(name: str, *, spec: CacheSpec, repo=None, isolation: Limits | None = DEFAULT_ISOLATION,
                   allow_unpinned: bool = False) -> Reader:
    """The reader a name stands for, set up to read caches of `spec`; code is isolated, admitted and loaded
    as writers' is (resolve), an isolated one by readers.run_reader's child."""
    parsed = parse(name, error=ProducerError)
    if parsed.kind is Kind.DEEPGEMM_SRC:  # no nvcc, GPU or checkout: NotRunnableHere before a child starts
        from .adapters.deepgemm_src import require_here
        require_here(parsed)
    if parsed.kind in KINDS[Role.READER]:
        admit_release(parsed, repo=repo, allow_unpinned=allow_unpinned)
        _declared(name, "reader")(spec, None)  # a spec a preset's table declares unsupported: refused now
        if isolation is not None:
            return Reader(name, f"{name} (run in a child process)", _in_child_only, isolation=isolation,
                          repo=None if repo is None else str(repo), spec=spec)
    if parsed.kind is Kind.PRESET:  # `repo`: a clone of the project's repository (--checkout)
        from ..code.projects.compose import load
        done = load(name, "reader", checkout=repo, spec=spec)
        return Reader(name, done.description, done.fn, provenance=done.provenance,
                      check=lambda spec, device: prepare_to_run(done, spec.fp8, device))
    if parsed.kind is Kind.DEEPGEMM_SRC:
        from .adapters.deepgemm_src import reader
        return reader(parsed, spec)
    if parsed.kind in KINDS[Role.READER]:
        return _reader_from_code(name, spec, repo)
    return _entry(name, Role.READER).load(spec)


# Triton has no cast between an FP8 type and an integer type (triton.language.semantic: "cannot cast ... to
# ..."), compiled or interpreted. A kernel meets it when its value pointer is uint8 (a value region not viewed
# as FP8) and it stores FP8 values through it, or when it converts x/s to uint8 and stores that through an FP8
# pointer: the seed's bug. The interpreter's message carries the whole value array; this names the cause.
_CANNOT_CAST = re.compile(r"cannot cast .* to .*?\b(u?int\d+|fp8\w*|float8\w*)\W*$", re.S)


def fp8_integer_cast(exc: BaseException) -> str | None:
    """The one-line reason for a failed FP8 <-> integer cast inside a kernel, or None for any other failure."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        match = _CANNOT_CAST.search(str(exc))
        if match is not None:
            target = match.group(1)
            what = (f"stores FP8 values through a {target} pointer" if target.startswith(("u", "int")) else
                    f"stores integer values (x/s converted by .to() to an integer type) through an {target} pointer")
            return (f"the kernel {what}: Triton cannot cast between FP8 and integer types (a compile error on"
                    " the GPU as well), the seed's integer-cast bug; view the value region as the FP8 dtype"
                    " before launching and convert x/s with .to(the pointer's FP8 element type)")
        exc = exc.__cause__ or exc.__context__
    return None


def _write(producer: Producer, spec: CacheSpec, k: torch.Tensor, slot_mapping: torch.Tensor,
           buffer: CacheBuffer) -> list:
    """Call the writer on `buffer`'s cache (in a layer view, core/cache.py); returns how each interpreted
    Triton grid ran (GridRun records)."""
    from ..triton_cpu.interpreter import scope_for
    given = {"fp8_dtype": spec.fp8.torch_dtype(), "layout": spec.layout.value}
    kwargs = {key: value for key, value in given.items() if key in producer.keywords}
    grids: list = []

    def write(cache: torch.Tensor) -> None:
        try:
            with scope_for(cache.device, grid=producer.interpreter != "sequential") as ran:  # CPU: exact
                producer.writer(k, cache, slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg, **kwargs)
            grids.extend(ran)
            if cache.is_cuda:
                torch.cuda.synchronize(cache.device)
        except ProducerError:
            raise
        except SystemExit as exc:  # --in-process: the writer's exit is its error, worded as a child's would be
            raise ProducerError(exited(f"producer {producer.name!r}", exc.code, "writing")) from exc
        except Exception as exc:
            cast = fp8_integer_cast(exc)
            reason = f": {cast}" if cast is not None else f" raised {failure(exc)}"
            raise ProducerError(f"producer {producer.name!r}{reason}") from exc

    write_in_layer(buffer, write)
    return grids


def run_in_child(name: str, spec_json: str, repo: str | None, k: torch.Tensor, slot_mapping: torch.Tensor,
                 buffer: torch.Tensor, interpreter: str = "grid") -> dict:
    """The child's side of an isolated run (isolation.run_isolated target): load the producer by name,
    write the shared buffer, report where the code came from and whether it ran Triton kernels."""
    phase("loading")
    spec = CacheSpec.from_dict(json.loads(spec_json))
    producer = dataclasses.replace(resolve(name, fp8=spec.fp8, repo=repo, isolation=None, allow_unpinned=True),
                                   interpreter=interpreter)  # the parent admitted it
    producer.check(spec, buffer.device)
    phase("writing")
    grids = _write(producer, spec, k, slot_mapping, CacheBuffer(spec, buffer))
    return {"provenance": json.loads(json.dumps(with_grids(producer.provenance, grids), default=str)),
            "description": producer.description, "triton": bool(producer.triton)}


def with_grids(provenance: dict, grids: list) -> dict:
    """A side's provenance with how its interpreted Triton grids ran (`interpreter`: one line per grid, at
    once in N batches or sequentially and why), in the JSON's baseline_provenance / candidate_provenance."""
    return {**provenance, "interpreter": "; ".join(run.note() for run in grids)[:1000]} if grids else provenance


def run_child(side: Producer | Reader, target: str, args: tuple, fmt: FP8Format,
              device: torch.device) -> tuple[dict, Producer | Reader]:
    """`side` (an isolated writer or reader) run in a child under its limits (isolation.run_isolated
    `target`): the child's report, and `side` with the description and provenance the child reported."""
    what = "producer" if isinstance(side, Producer) else "reader"
    try:
        report = run_isolated(target, args, limits=side.isolation, label=f"{what} {side.name!r}")
    except IsolatedError as exc:
        if exc.not_here:  # a skip only where fp8check itself finds the format not runnable here
            require_triton_format(fmt, device)
        raise
    description = one_line(report.get("description", side.description), 1000)
    return report, dataclasses.replace(side, description=description,
                                       provenance=reported_provenance(report.get("provenance")))


def run_producer(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device,
                 pad_slot: int = SKIP_PADDING) -> tuple[CacheBuffer, Producer]:
    """A fresh poisoned cache written by the producer on clones of the inputs, the clones it changed in place
    named in `modified_inputs`, after check_slots. Returns the producer as it ran: for an isolated one, with
    what its child reported (description, provenance, whether it ran Triton). pad_slot >= 0: the producer
    gets its padding (slot -1) sent to that dummy slot, whose bytes are put back to poison: SGLang's convention."""
    check_slots(spec, inputs.slot_mapping, inputs.source)
    buffer = CacheBuffer.allocate(spec, device)
    given = padded_slots(inputs.slot_mapping, pad_slot)
    k, slot_mapping = guarded_inputs(spec, inputs.k, given, pad_slot)
    producer.check(spec, device)  # isolated: the parent's own (a preset's declared specs), no code under test
    if producer.isolation is not None:
        report, producer = run_child(producer, f"{__name__}:run_in_child", (producer.name, spec.to_json(),
                                     producer.repo, k, slot_mapping, buffer.buffer, producer.interpreter),
                                     spec.fp8, device)
        producer = dataclasses.replace(producer, triton=report.get("triton") is True)
    else:
        grids = _write(producer, spec, k, slot_mapping, buffer)
        producer = dataclasses.replace(producer, provenance=with_grids(producer.provenance, grids))
    # bit for bit (NaN payloads included), on tensors a producer may have re-shaped or re-typed
    changed = tuple(name for name, a, b in (("k", inputs.k, k), ("slot_mapping", given, slot_mapping))
                    if (a.shape, a.dtype, a.device) != (b.shape, b.dtype, b.device)
                    or not torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))
    if pad_slot != SKIP_PADDING:
        forget_slot(buffer, pad_slot)
    return dataclasses.replace(buffer, modified_inputs=changed), producer


def run(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device) -> CacheBuffer:
    """run_producer's cache only."""
    return run_producer(producer, spec, inputs, device)[0]
