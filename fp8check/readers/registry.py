"""The reader registry: one frozen entry per name, plus readers from files, and the one place readers run.

A reader has vLLM's signature (docs/NUMERICS.md):
`fn(q_fp8 [B, next_n, H, D], kv_cache uint8 [num_blocks, block_size, 1, D + 4*D/qbs], weights fp32
[B*next_n, H], context_lens int32 [B], block_tables int32 [B, max_blocks], max_model_len)
-> logits [B*next_n, max_model_len]`.
Every reader call goes through `run_reader`, so a reader never touches fp8check's own tensors and its
failures are one-line errors (exit 2), never a verdict. Readers from files are untrusted: by default they
run in a child process (isolation.py), exactly like writers from files.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..errors import CheckerError, ProducerError, failure, one_line
from ..isolation import Limits, phase, run_isolated
from ..sources import FILE_PREFIX, PKG_PREFIX, PRESET_PREFIX, VLLM_FILE_PREFIX
from ..spec import CacheSpec
from .obligations import GuardedOutput
from ..writers.producer import Check, no_check, reported_provenance
from ..writers.registry import DEFAULT_ISOLATION, Entry

ReaderFn = Callable[..., torch.Tensor]
REFERENCE = "reference"


@dataclass(frozen=True)
class Reader:
    name: str
    description: str
    fn: ReaderFn
    exact: bool = False  # fp8check's own float64 reader: on the baseline's bytes it IS the truth
    check: Check = no_check  # raises ProducerError when this spec cannot be read on this device
    provenance: dict = field(default_factory=dict)  # file, function, revision, commit, sha256, bound names
    # Run in a child process under these limits (readers from files); None: in this process. An isolated
    # Reader holds no code: the child loads it by `name` (git names read from `repo`).
    isolation: Limits | None = None
    repo: str | None = None
    spec: CacheSpec | None = None  # what an isolated reader's child loads it for (the FP8 format its names bind to)
    # fn fills a caller-made output buffer (keyword-only `out`, float32 [B*next_n, max_model_len], masked -inf)
    # instead of returning logits; it gets one with poisoned guard rows and columns (readers/obligations.py)
    fills_output: bool = False


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


def untrusted(name: str) -> bool:
    """A reader whose code comes from the user's files (`file:`, `vllm-file:`, either from `git:`)."""
    return name.startswith((FILE_PREFIX, VLLM_FILE_PREFIX, PKG_PREFIX, PRESET_PREFIX))


def _not_here(*args, **kwargs) -> None:
    raise CheckerError("an isolated reader's code runs only in its child process")


def resolve(name: str, *, spec: CacheSpec, repo=None, isolation: Limits | None = DEFAULT_ISOLATION,
            allow_unpinned: bool = False) -> Reader:
    """The reader a name stands for, set up to read caches of `spec` (files may come from git in `repo`).

    A reader from a file is not loaded here when `isolation` is given (the default): the Reader only names
    it, and `run_reader` loads and runs it in a child process under those limits (with the spec's FP8
    format and `repo`). `isolation=None` loads it into this process (`--in-process`, for debugging).
    Released code passes the one hash rule first, as writers do (writers.registry.resolve)."""
    if untrusted(name):
        from ..writers.projects.pins import admit_release

        admit_release(name, repo=repo, allow_unpinned=allow_unpinned)
    if name.startswith(PRESET_PREFIX):  # a spec its table declares unsupported: refused before anything runs
        from ..writers.projects.compose import spec_check

        spec_check(name, "reader")(spec, None)
    if untrusted(name) and isolation is not None:
        return Reader(name, f"{name} (run in a child process)", _not_here, isolation=isolation,
                      repo=None if repo is None else str(repo), spec=spec)
    if name.startswith(PRESET_PREFIX):  # `repo`: a clone of the project's repository (--checkout)
        from ..writers.projects.compose import cpu_check, load

        done = load(name, "reader", checkout=repo)
        done.loaded.rebind(spec.fp8, spec.layout)
        return Reader(name, f"{done.preset.description} from {done.loaded.origin.describe()}", done.fn,
                      check=cpu_check(done.loaded), provenance=done.provenance)
    if untrusted(name):
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


# Dtypes a reader's logits may have: each converts to float64 and back exactly (the child's result
# crosses the process boundary in the parent's float64 buffer, and comes back in its own dtype).
LOGIT_DTYPES = {str(d): d for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                                    torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz)}


NO_OUTSIDE_WRITES = (0, ())


def _read(reader: Reader, args: list[torch.Tensor], max_model_len: int,
          guarded: GuardedOutput | None = None) -> tuple[torch.Tensor, tuple]:
    """Call a loaded reader on `args` (its own copies); any failure or malformed result is one ProducerError.
    Returns the logits and (count, first positions) of its writes outside its rows (obligations.py). A reader
    that fills an output buffer fills `guarded` (a fresh one when None)."""
    from ..writers.interpreter import scope_for

    device = args[1].device
    try:
        with scope_for(device):  # Triton kernels on CPU tensors: the exact interpreter
            if reader.fills_output:
                guarded = guarded or GuardedOutput.allocate(args[0].shape[0] * args[0].shape[1], max_model_len,
                                                            device)
                reader.fn(*args, max_model_len, out=guarded.logits)
                logits = guarded.logits
            else:
                logits = reader.fn(*args, max_model_len)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except ProducerError:
        raise
    except Exception as exc:
        raise ProducerError(f"reader {reader.name!r} raised {failure(exc)}") from exc
    rows = args[0].shape[0] * args[0].shape[1]
    outside = guarded.outside_writes() if reader.fills_output else NO_OUTSIDE_WRITES
    return _checked_output(reader, logits, rows, max_model_len, device), outside


def read_in_child(name: str, spec_json: str, repo: str | None, q_fp8: torch.Tensor, kv_cache: torch.Tensor,
                  weights: torch.Tensor, context_lens: torch.Tensor, block_tables: torch.Tensor, max_model_len: int,
                  out: torch.Tensor, guard_buffer: torch.Tensor) -> dict:
    """The child's side of an isolated read (isolation.run_isolated target): load the reader by name for
    the spec, run it on the shared copies, copy its checked logits into the shared float64 `out`, and
    report their dtype and where the code came from. A reader that fills an output buffer fills the shared
    `guard_buffer` (obligations.GuardedOutput), whose guards the parent checks."""
    phase("loading")
    spec = CacheSpec.from_dict(json.loads(spec_json))
    reader = resolve(name, spec=spec, repo=repo, isolation=None, allow_unpinned=True)  # the parent admitted it
    reader.check(spec, kv_cache.device)  # its Triton kernels: the exact interpreter on the CPU
    phase("reading")
    guarded = GuardedOutput(guard_buffer, q_fp8.shape[0] * q_fp8.shape[1], max_model_len)
    logits, _ = _read(reader, [q_fp8, kv_cache, weights, context_lens, block_tables], max_model_len, guarded)
    if str(logits.dtype) not in LOGIT_DTYPES:
        raise ProducerError(f"reader {name!r} returned {logits.dtype} logits; expected one of {', '.join(LOGIT_DTYPES)}")
    out.copy_(logits)
    return {"dtype": str(logits.dtype), "description": reader.description,
            "provenance": json.loads(json.dumps(reader.provenance, default=str))}


def _read_isolated(reader: Reader, args: list[torch.Tensor], max_model_len: int) -> tuple[torch.Tensor, Reader, tuple]:
    """The reader in a child process: the parent allocates the outputs (the logits, and the guarded buffer a
    reader may fill) and trusts only their bytes and the dtype the child names (one of LOGIT_DTYPES), never
    an object the child made. Returns the logits, the reader as it ran and its writes outside its rows."""
    rows = args[0].shape[0] * args[0].shape[1]
    out = torch.full((rows, max_model_len), float("nan"), dtype=torch.float64, device=args[1].device)
    guarded = GuardedOutput.allocate(rows, max_model_len, args[1].device)
    shared = (reader.name, reader.spec.to_json(), reader.repo, *args, max_model_len, out, guarded.buffer)
    report = run_isolated(f"{__name__}:read_in_child", shared, limits=reader.isolation, label=f"reader {reader.name!r}")
    dtype = LOGIT_DTYPES.get(str(report.get("dtype")))
    if dtype is None:
        raise ProducerError(f"reader {reader.name!r}: its child reported logits of dtype"
                            f" {str(report.get('dtype'))[:40]!r}")
    ran = dataclasses.replace(reader, description=one_line(report.get("description", reader.description), 1000),
                              provenance=reported_provenance(report.get("provenance")))
    return out.to(dtype), ran, guarded.outside_writes()


def run_reader_guarded(reader: Reader, q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                       context_lens: torch.Tensor, block_tables: torch.Tensor,
                       max_model_len: int) -> tuple[torch.Tensor, Reader, tuple]:
    """The one place a reader runs: on copies of the tensors (fp8check's stay untouched), its failures and
    malformed results turned into one-line errors. Returns logits [B*next_n, max_model_len], the reader
    as it ran (for an isolated one, run in a child: with what its child reported, description and
    provenance) and (count, first positions) of its writes outside its rows, for readers that fill a buffer."""
    args = [t.clone() for t in (q_fp8, kv_cache, weights, context_lens, block_tables)]
    if reader.isolation is None:
        logits, outside = _read(reader, args, max_model_len)
        return logits, reader, outside
    logits, ran, outside = _read_isolated(reader, args, max_model_len)
    rows = q_fp8.shape[0] * q_fp8.shape[1]
    return _checked_output(ran, logits, rows, max_model_len, kv_cache.device), ran, outside


def run_reader_reporting(reader: Reader, q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                         context_lens: torch.Tensor, block_tables: torch.Tensor,
                         max_model_len: int) -> tuple[torch.Tensor, Reader]:
    """run_reader_guarded's logits and reader as it ran."""
    logits, ran, _ = run_reader_guarded(reader, q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len)
    return logits, ran


def run_reader(reader: Reader, q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
               context_lens: torch.Tensor, block_tables: torch.Tensor, max_model_len: int) -> torch.Tensor:
    """run_reader_reporting's logits only."""
    return run_reader_reporting(reader, q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len)[0]
