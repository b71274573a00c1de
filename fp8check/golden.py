"""Golden files: a producer's inputs and cache bytes in one safetensors file, checksummed.

Tensors: `k` (bf16 [T, head_dim]), `slot_mapping` (int64 [T]), `kv_cache` (uint8
[num_blocks, block_size*(head_dim + 4*head_dim/qbs)]). String metadata: `spec` (JSON), `producer`,
`emulated`, `torch`, `triton`, `fp8check`, `sha256` (of the spec JSON and producer, then the three
tensors' bytes in that order).
safetensors holds raw bytes only: nothing is ever unpickled.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from .cache import CacheBuffer
from .inputs import InputError, Inputs, load
from .spec import CacheSpec, SpecError
from .errors import GoldenError

FORMAT = "fp8check-golden/1"


@dataclass(frozen=True)
class Golden:
    spec: CacheSpec
    producer: str
    emulated: bool
    inputs: Inputs
    kv_cache: torch.Tensor  # uint8 [num_blocks, block_bytes]
    metadata: dict[str, str]


def checksum(k: torch.Tensor, slot_mapping: torch.Tensor, kv_cache: torch.Tensor, spec_json: str, producer: str) -> str:
    """sha256 over what a verdict depends on: the spec and producer metadata, then the tensors' bytes."""
    h = hashlib.sha256()
    h.update(f"{spec_json}\n{producer}\n".encode())
    for tensor in (k, slot_mapping, kv_cache):
        h.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def write(path: Path, *, spec: CacheSpec, producer: str, emulated: bool, inputs: Inputs,
          buffer: CacheBuffer, versions: dict[str, str], provenance: dict | None = None) -> None:
    from safetensors.torch import save_file

    k = inputs.k.detach().cpu().contiguous()
    slot_mapping = inputs.slot_mapping.detach().cpu().contiguous()
    kv_cache = buffer.flat.detach().cpu().contiguous()
    metadata = {
        "format": FORMAT, "spec": spec.to_json(), "producer": producer, "emulated": json.dumps(emulated),
        "sha256": checksum(k, slot_mapping, kv_cache, spec.to_json(), producer), **versions,
    }
    if provenance:  # what ran (file, function, git revision and commit, sha256, bound names); informational
        metadata["producer_provenance"] = json.dumps(provenance, sort_keys=True)
    save_file({"k": k, "slot_mapping": slot_mapping, "kv_cache": kv_cache}, str(path), metadata=metadata)


def _metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return dict(f.metadata() or {})
    except Exception as exc:  # safetensors raises several types for damaged headers
        raise GoldenError(f"{path}: not a readable safetensors file ({str(exc).splitlines()[0]})") from None


def read(path: Path) -> Golden:
    tensors = load(path)
    metadata = _metadata(path)
    if metadata.get("format") != FORMAT:
        raise GoldenError(f"{path}: not an fp8check golden file (metadata format is {metadata.get('format')!r})")
    try:
        spec = CacheSpec.from_dict(json.loads(metadata["spec"]))
    except (KeyError, json.JSONDecodeError, SpecError) as exc:
        raise GoldenError(f"{path}: golden metadata 'spec' is unusable ({exc})") from None
    missing = [name for name in ("k", "slot_mapping", "kv_cache") if name not in tensors]
    if missing:
        raise GoldenError(f"{path}: golden file lacks tensor(s) {', '.join(missing)}")
    k, slot_mapping, kv_cache = tensors["k"], tensors["slot_mapping"], tensors["kv_cache"]
    expected = (spec.num_blocks, spec.block_bytes)
    if kv_cache.dtype != torch.uint8 or tuple(kv_cache.shape) != expected:
        raise GoldenError(f"{path}: kv_cache is {kv_cache.dtype} {list(kv_cache.shape)}, spec needs uint8 {list(expected)}")
    if k.dtype != torch.bfloat16 or k.dim() != 2 or k.shape[1] != spec.head_dim:
        raise GoldenError(f"{path}: k is {k.dtype} {list(k.shape)}, spec needs bf16 [T, {spec.head_dim}]")
    if slot_mapping.dtype != torch.int64 or tuple(slot_mapping.shape) != (k.shape[0],):
        raise GoldenError(f"{path}: slot_mapping is {slot_mapping.dtype} {list(slot_mapping.shape)}, needs int64 [{k.shape[0]}]")
    if checksum(k, slot_mapping, kv_cache, metadata["spec"], metadata.get("producer", "")) != metadata.get("sha256"):
        raise GoldenError(f"{path}: checksum mismatch: the file was modified or damaged after recording")
    inputs = Inputs(k.contiguous(), slot_mapping.contiguous(), f"replayed from golden {path.name}")
    return Golden(spec, metadata.get("producer", "?"), metadata.get("emulated") == "true", inputs, kv_cache, metadata)


def check_options(path: Path, spec: CacheSpec, given: dict[str, tuple[str, object]]) -> None:
    """Spec options typed on the command line must agree with the spec the golden file was recorded with.

    `given`: spec field -> (flag, value) for each option given explicitly; enum fields as their values.
    """
    recorded = spec.to_dict()
    for field, (flag, value) in given.items():
        if value != recorded[field]:
            raise GoldenError(f"{flag} {value} contradicts {path}, recorded with {field} {recorded[field]}")


def as_side(golden: Golden, path: Path, device):
    """The recorded bytes as a finished baseline Side for compare(), named after the recording producer."""
    from .writers.producer import Side

    recorded = json.loads(golden.metadata.get("producer_provenance", "{}"))
    provenance = {"recorded_by": recorded} if recorded else {}
    return Side(f"{golden.producer} (golden {path.name})", f"recorded in {path}", golden.emulated,
                as_buffer(golden, device), provenance)


def as_buffer(golden: Golden, device) -> CacheBuffer:
    """The recorded bytes in a poisoned buffer (guards as a fresh allocation has them)."""
    buffer = CacheBuffer.allocate(golden.spec, device)
    buffer.flat.copy_(golden.kv_cache.to(device))
    return buffer
