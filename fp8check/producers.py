"""Producers: cache writers with the de-facto signature, looked up by name in one registry.

A writer is `fn(k, kv_cache, slot_mapping, quant_block_size, scale_fmt)` writing the uint8 cache
`[num_blocks, block_size, head_dim + 4*head_dim/qbs]` in place. Where it also accepts the keywords
`fp8_dtype` and/or `layout`, it is given the spec's torch dtype and layout name.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .cache import CacheBuffer
from .inputs import Inputs
from .spec import CacheSpec

Writer = Callable[..., None]


class ProducerError(RuntimeError):
    """A producer that cannot be found, loaded or run; one line naming it. Never a mismatch."""


@dataclass(frozen=True)
class Producer:
    name: str
    description: str
    writer: Writer
    emulated: bool = False  # a PyTorch emulation of a writer that is not itself running

    def check(self, spec: CacheSpec, device: torch.device) -> None:
        """Raise ProducerError when this producer cannot run this spec on this device."""
        check = getattr(self.writer, "check", None)
        if check is not None:
            check(spec, device)


def _reference() -> Producer:
    from .reference import AITER, aiter_writer

    return Producer("reference", AITER.description, aiter_writer, emulated=True)


def _reference_vllm() -> Producer:
    from .reference import VLLM, vllm_writer

    return Producer("reference-vllm", VLLM.description, vllm_writer, emulated=True)


def _triton() -> Producer:
    from .triton_writer import fixed_writer

    return Producer("triton", "Triton writer (vLLM ROCm semantics), value region viewed as FP8", fixed_writer)


def _triton_buggy() -> Producer:
    from .triton_writer import buggy_writer

    return Producer("triton-buggy", "Triton writer, the seed's buggy wrapper: value region passed as uint8", buggy_writer)


def _adapter(module_name: str) -> Callable[[], Producer]:
    """The loader of a real writer that may not be installed (fp8check/adapters/)."""

    def load() -> Producer:
        return importlib.import_module(f".adapters.{module_name}", __package__).producer()

    return load


def _adapter_availability(module_name: str) -> Callable[[], tuple[bool, str]]:
    def probe() -> tuple[bool, str]:
        return importlib.import_module(f".adapters.{module_name}", __package__).availability()

    return probe


# name -> (one-line description, loader). Loaders import lazily: the registry costs nothing to build.
BUILTIN: dict[str, tuple[str, Callable[[], Producer]]] = {
    "reference": ("PyTorch emulation of aiter's C++ op + shuffle_weight", _reference),
    "reference-vllm": ("PyTorch emulation of vLLM's writer numerics (DIV 448/224, x / s)", _reference_vllm),
    "triton": ("Triton writer with vLLM ROCm semantics, fixed wrapper (FP8 view)", _triton),
    "triton-buggy": ("Triton writer, buggy wrapper (uint8 slice: integer conversion)", _triton_buggy),
    "aiter": ("ROCm aiter's C++ op indexer_k_quant_and_cache (preshuffle, or row-major + shuffle_weight)",
              _adapter("aiter")),
    "vllm-triton": ("vLLM's Triton writer indexer_k_quant_and_cache_triton (installed vLLM)", _adapter("vllm_triton")),
    "vllm-cuda": ("vLLM's C++ op torch.ops._C_cache_ops.indexer_k_quant_and_cache (row-major)", _adapter("vllm_cuda")),
}

def _triton_availability() -> tuple[bool, str]:
    try:
        import triton
    except ImportError as exc:
        return False, f"triton is not importable ({exc})"
    if torch.cuda.is_available():
        return True, f"compiled by Triton {triton.__version__} on {torch.cuda.get_device_name()}"
    from .spec import FP8Format
    from .triton_exact import check

    ok, reason = check(FP8Format.E4M3FN)
    return ok, f"on the CPU only through the interpreter: {reason}"


# name -> availability probe: (ok, one-line reason), never raises, imports lazily. A name without one
# is always available.
AVAILABILITY: dict[str, Callable[[], tuple[bool, str]]] = {
    "triton": _triton_availability,
    "triton-buggy": _triton_availability,
    "aiter": _adapter_availability("aiter"),
    "vllm-triton": _adapter_availability("vllm_triton"),
    "vllm-cuda": _adapter_availability("vllm_cuda"),
}

# The default baseline: the real aiter op where it can run, its PyTorch emulation `reference` elsewhere.
AUTO = "auto"


def available(name: str) -> tuple[bool, str]:
    """(ok, one-line reason) for a registry name."""
    if name not in BUILTIN:
        return False, f"unknown producer {name!r}"
    probe = AVAILABILITY.get(name)
    return probe() if probe is not None else (True, "built in")


def _auto() -> Producer:
    ok, reason = available("aiter")
    if ok:
        return BUILTIN["aiter"][1]()
    fallback = BUILTIN["reference"][1]()
    return dataclasses.replace(fallback, description=f"{fallback.description} (auto: aiter unavailable: {reason})")


def names() -> list[str]:
    return list(BUILTIN)


def load_plugin(spec_text: str) -> Producer:
    """`file:PATH:FUNC` -> a Producer around FUNC of the Python file PATH."""
    body = spec_text[len("file:"):]
    path_text, sep, func_name = body.rpartition(":")
    if not sep or not path_text or not func_name:
        raise ProducerError(f"producer {spec_text!r}: expected file:PATH:FUNC")
    path = Path(path_text)
    if not path.is_file():
        raise ProducerError(f"producer {spec_text!r}: {path} is not a file")
    module_name = f"fp8check_plugin_{abs(hash(str(path.resolve())))}"
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the plugin's own code failed: name it, keep the cause for --debug
        raise ProducerError(f"producer {spec_text!r}: {path} failed to import: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise ProducerError(f"producer {spec_text!r}: {path} has no function {func_name!r}")
    try:
        inspect.signature(fn).bind(None, None, None, None, None)
    except (TypeError, ValueError):
        raise ProducerError(
            f"producer {spec_text!r}: {func_name} must take (k, kv_cache, slot_mapping, quant_block_size,"
            f" scale_fmt), has {func_name}{inspect.signature(fn)}"
        ) from None
    return Producer(spec_text, f"{func_name} from {path}", fn)


def resolve(name: str) -> Producer:
    if name.startswith("file:"):
        return load_plugin(name)
    if name == AUTO:
        return _auto()
    if name not in BUILTIN:
        raise ProducerError(f"unknown producer {name!r}; known: {', '.join(names())}, {AUTO}, file:PATH:FUNC")
    ok, reason = available(name)
    if not ok:
        raise ProducerError(f"producer {name!r} is unavailable: {reason}")
    return BUILTIN[name][1]()


def _accepts(fn: Writer, keyword: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def run(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device) -> CacheBuffer:
    """A fresh poisoned cache written by the producer. The inputs are cloned: they are never modified."""
    producer.check(spec, device)
    buffer = CacheBuffer.allocate(spec, device)
    kwargs = {}
    if _accepts(producer.writer, "fp8_dtype"):
        kwargs["fp8_dtype"] = spec.fp8.torch_dtype()
    if _accepts(producer.writer, "layout"):
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
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ProducerError(f"producer {producer.name!r} raised {type(exc).__name__}: {first}") from exc
    return buffer
