"""The one place readers run (their names resolve in registry.py, as writers' do); a reader has vLLM's
signature (docs/parity.md) and gets copies of fp8check's tensors. Its failures are one-line errors (exit 2),
never a verdict. Readers from files run in a child process (isolation.py), exactly like writers from files.
"""

from __future__ import annotations

import json

import torch

from ..core.errors import ProducerError, failure
from ..core.isolation import exited, phase
from ..core.producer import Reader
from ..core.spec import CacheSpec
from .obligations import GuardedOutput
from .registry import resolve_reader, run_child


def _checked_output(reader: Reader, logits, rows: int, max_model_len: int, device: torch.device) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor):
        raise ProducerError(f"reader {reader.name!r} returned {type(logits).__name__}, not a tensor of logits")
    if tuple(logits.shape) != (rows, max_model_len) or not logits.dtype.is_floating_point:
        raise ProducerError(f"reader {reader.name!r} returned {logits.dtype} {list(logits.shape)}; expected"
                            f" floating-point [B*next_n, max_model_len] = [{rows}, {max_model_len}]")
    if logits.device != device:
        raise ProducerError(f"reader {reader.name!r} returned logits on {logits.device}, its inputs were on {device}")
    return logits


# Dtypes a reader's logits may have: each converts to float64 and back exactly (the child's result
# crosses the process boundary in the parent's float64 buffer, and comes back in its own dtype).
LOGIT_DTYPES = {str(d): d for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                                    torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz)}


def _read(reader: Reader, args: list[torch.Tensor], max_model_len: int,
          guarded: GuardedOutput | None = None) -> tuple[torch.Tensor, tuple]:
    """A loaded reader called on its own copies `args`: its logits and its writes outside its rows, as
    run_reader_guarded returns them. A reader that fills an output buffer fills `guarded` (fresh when None)."""
    from ..triton_cpu.interpreter import scope_for
    device, rows = args[1].device, args[0].shape[0] * args[0].shape[1]
    try:
        with scope_for(device):  # Triton kernels on CPU tensors: the exact interpreter
            if reader.fills_output:
                guarded = guarded or GuardedOutput.allocate(rows, max_model_len, device)
                reader.fn(*args, max_model_len, out=guarded.logits)
                logits = guarded.logits
            else:
                logits = reader.fn(*args, max_model_len)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except ProducerError:
        raise
    except SystemExit as exc:  # --in-process: the reader's exit is its error, worded as a child's would be
        raise ProducerError(exited(f"reader {reader.name!r}", exc.code, "reading")) from exc
    except Exception as exc:
        raise ProducerError(f"reader {reader.name!r} raised {failure(exc)}") from exc
    outside = guarded.outside_writes() if reader.fills_output else (0, ())
    return _checked_output(reader, logits, rows, max_model_len, device), outside


def read_in_child(name: str, spec_json: str, repo: str | None, q_fp8: torch.Tensor, kv_cache: torch.Tensor,
                  weights: torch.Tensor, context_lens: torch.Tensor, block_tables: torch.Tensor, max_model_len: int,
                  out: torch.Tensor, guard_buffer: torch.Tensor) -> dict:
    """The child's side of an isolated read (isolation.run_isolated target): the reader loaded by name reads
    the shared copies into the shared float64 `out` (or fills the shared `guard_buffer`, whose guards the
    parent checks); it reports the logits' dtype and where the code came from."""
    phase("loading")
    spec = CacheSpec.from_dict(json.loads(spec_json))
    reader = resolve_reader(name, spec=spec, repo=repo, isolation=None)
    reader.check(spec, kv_cache.device)  # its Triton kernels: the exact interpreter on the CPU
    phase("reading")
    guarded = GuardedOutput(guard_buffer, q_fp8.shape[0] * q_fp8.shape[1], max_model_len)
    logits, _ = _read(reader, [q_fp8, kv_cache, weights, context_lens, block_tables], max_model_len, guarded)
    if str(logits.dtype) not in LOGIT_DTYPES:
        raise ProducerError(f"reader {name!r} returned {logits.dtype} logits; expected one of"
                            f" {', '.join(LOGIT_DTYPES)}")
    out.copy_(logits)
    return {"dtype": str(logits.dtype), "description": reader.description,
            "provenance": json.loads(json.dumps(reader.provenance, default=str))}


def run_reader_guarded(reader: Reader, q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                       context_lens: torch.Tensor, block_tables: torch.Tensor,
                       max_model_len: int) -> tuple[torch.Tensor, Reader, tuple]:
    """The one place a reader runs, on copies of the tensors. Returns logits [B*next_n, max_model_len], the
    reader as it ran and (count, first positions) of its writes outside its rows, for readers that fill a
    buffer. An isolated reader runs in a child: the parent allocates the outputs (the logits, and the guarded
    buffer a reader may fill) and trusts only their bytes and the dtype the child names (one of LOGIT_DTYPES),
    never an object the child made; the reader as it ran has the description and provenance it reported."""
    args = [t.clone() for t in (q_fp8, kv_cache, weights, context_lens, block_tables)]
    if reader.isolation is None:
        logits, outside = _read(reader, args, max_model_len)
        return logits, reader, outside
    rows = q_fp8.shape[0] * q_fp8.shape[1]
    out = torch.full((rows, max_model_len), float("nan"), dtype=torch.float64, device=kv_cache.device)
    guarded = GuardedOutput.allocate(rows, max_model_len, kv_cache.device)
    shared = (reader.name, reader.spec.to_json(), reader.repo, *args, max_model_len, out, guarded.buffer)
    report, ran = run_child(reader, f"{__name__}:read_in_child", shared, reader.spec.fp8, kv_cache.device)
    dtype = LOGIT_DTYPES.get(str(report.get("dtype")))
    if dtype is None:
        raise ProducerError(f"reader {reader.name!r}: its child reported logits of dtype"
                            f" {str(report.get('dtype'))[:40]!r}")
    logits = _checked_output(ran, out.to(dtype), rows, max_model_len, kv_cache.device)
    return logits, ran, guarded.outside_writes()


def run_reader_reporting(reader: Reader, *args) -> tuple[torch.Tensor, Reader]:
    """run_reader_guarded's logits and reader as it ran (the same arguments)."""
    return run_reader_guarded(reader, *args)[:2]


def run_reader(reader: Reader, *args) -> torch.Tensor:
    """run_reader_guarded's logits only (the same arguments)."""
    return run_reader_guarded(reader, *args)[0]
