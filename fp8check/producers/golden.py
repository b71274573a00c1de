"""Golden files: a producer's inputs, cache bytes and guard zones in one safetensors file, with its spec,
producer and versions as metadata and one checksum over the rest (sha256, or hmac-sha256 with
FP8CHECK_GOLDEN_KEY); the format is in docs/GOLDEN.md. safetensors holds raw bytes only: nothing is unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..code.names import is_git, read_source
from ..core.cache import CacheBuffer, buffer_bytes, equals_poison, guard_bytes
from ..core.errors import GoldenError
from ..core.isolation import GOLDEN_KEY_VARIABLE
from ..core.outputs import check_output, replace_atomically
from ..core.inputs import Inputs, check_slots, load_bytes
from ..core.paths import read_regular
from ..core.producer import Side
from ..core.spec import CacheSpec, SpecError

FORMAT = "fp8check-golden/2"
TENSORS = ("k", "slot_mapping", "kv_cache", "guards")
CHECKSUMS = ("sha256", "hmac-sha256")


@dataclass(frozen=True)
class Golden:
    spec: CacheSpec
    producer: str
    emulated: bool
    inputs: Inputs
    kv_cache: torch.Tensor  # uint8 [num_blocks, block_bytes]
    guards: torch.Tensor  # uint8 [2 * guard_bytes(spec)]
    metadata: dict[str, str]


def checksum(tensors: dict[str, torch.Tensor], metadata: dict[str, str], key: bytes | None = None) -> str:
    """sha256 (or HMAC-SHA256 with `key`) over every metadata key but the checksums, then the tensors."""
    h = hmac.new(key, digestmod=hashlib.sha256) if key else hashlib.sha256()
    covered = {name: value for name, value in metadata.items() if name not in CHECKSUMS}
    h.update(json.dumps(covered, sort_keys=True).encode() + b"\n")
    for name in TENSORS:
        tensor = tensors[name].detach().cpu().contiguous()
        h.update(f"{name} {tensor.dtype} {list(tensor.shape)}\n".encode())
        h.update(tensor.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def check_output_path(path: Path, option: str = "--out") -> None:
    """Only a regular file or a new name in an existing folder: never a device node, a symlink, a folder."""
    check_output(path, option=option)


def write(path: Path, *, spec: CacheSpec, producer: str, emulated: bool, inputs: Inputs, buffer: CacheBuffer,
          versions: dict[str, str], key: bytes | None = None, provenance: dict | None = None) -> None:
    """Record a producer's run; a run that wrote outside its cache, or nothing at all, is refused. The file is
    written next to `path` under a temporary name, then moved over it in one step (outputs.py)."""
    from safetensors.torch import save_file
    check_output_path(path)
    if stray := buffer.guard_writes():
        raise GoldenError(f"producer {producer!r} wrote {stray} bytes outside the cache; not recorded")
    if buffer.cache_untouched():
        raise GoldenError(f"producer {producer!r} wrote nothing into the cache; not recorded")
    tensors = {name: t.detach().cpu().contiguous() for name, t in
               zip(TENSORS, (inputs.k, inputs.slot_mapping, buffer.flat, buffer.guards))}
    metadata = {**versions, "format": FORMAT, "spec": spec.to_json(), "producer": producer,
                "emulated": json.dumps(emulated)}
    if provenance:  # what ran: file, function, git revision and commit, sha256, bound names
        metadata["producer_provenance"] = json.dumps(provenance, sort_keys=True)
    metadata["hmac-sha256" if key else "sha256"] = checksum(tensors, metadata, key)
    replace_atomically(path, lambda temporary: save_file(tensors, str(temporary), metadata=metadata), option="--out")


def _metadata(data: bytes, path: Path) -> dict[str, str]:
    """The `__metadata__` of a safetensors file's header (8 bytes of little-endian length, then JSON)."""
    length = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    try:
        if not 0 < length <= len(data) - 8:
            raise ValueError("header length out of range")
        metadata = json.loads(data[8:8 + length]).get("__metadata__") or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise ValueError("metadata is not a table of strings")
    except (ValueError, AttributeError) as exc:
        raise GoldenError(f"{path}: not a readable safetensors file ({exc})") from None
    return dict(metadata)


def _verify(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str], key: bytes | None) -> None:
    if key is None and "hmac-sha256" in metadata:
        raise GoldenError(f"{path}: signed with a key (hmac-sha256); set FP8CHECK_GOLDEN_KEY to verify it")
    if key is not None and "hmac-sha256" not in metadata:
        raise GoldenError(f"{path}: not signed, and FP8CHECK_GOLDEN_KEY is set: only signed recordings are trusted")
    name = "hmac-sha256" if key else "sha256"
    if not hmac.compare_digest(checksum(tensors, metadata, key), str(metadata.get(name, ""))):
        raise GoldenError(f"{path}: checksum mismatch: the file was modified or damaged after recording"
                          + (" (or signed with another key)" if key else ""))


def _check_shapes(path: Path, spec: CacheSpec, tensors: dict[str, torch.Tensor]) -> None:
    tokens = tensors["k"].shape[:1]  # k's shape is checked before slot_mapping's
    blocks, guards = [spec.num_blocks, spec.block_bytes], [2 * guard_bytes(spec)]
    for name, dtype, shape, needs in (
            ("kv_cache", torch.uint8, blocks, f"spec needs uint8 {blocks}"),
            ("guards", torch.uint8, guards, f"spec needs uint8 {guards}"),
            ("k", torch.bfloat16, [*tokens, spec.head_dim], f"spec needs bf16 [T, {spec.head_dim}]"),
            ("slot_mapping", torch.int64, list(tokens), f"needs int64 {list(tokens)}")):
        if tensors[name].dtype != dtype or list(tensors[name].shape) != shape:
            raise GoldenError(f"{path}: {name} is {tensors[name].dtype} {list(tensors[name].shape)}, {needs}")


def trusted_key() -> bytes | None:
    """The one rule for FP8CHECK_GOLDEN_KEY, in every command, the API and the pytest plugin: when it is
    set, recordings are signed with it (record) and only recordings signed with it are read."""
    key = os.environ.get(GOLDEN_KEY_VARIABLE)
    return key.encode() if key else None


def load_trusted(text: str, repo: Path | None = None) -> tuple[Golden, Path, dict]:
    """The one loader of golden files: `text` is a path or `git:REV:PATH` (read from `repo`), read whole and
    verified with trusted_key(). Returns (golden, path named, git provenance or {})."""
    if is_git(text):
        source = read_source(text, repo, error=GoldenError)
        origin = {key: source.provenance[key] for key in ("revision", "commit", "repository")}
        return read(Path(source.provenance["file"]), trusted_key(), data=source.data), Path(text), origin
    return read(Path(text), trusted_key()), Path(text), {}


def read(path: Path, key: bytes | None = None, *, data: bytes | None = None) -> Golden:
    """A verified recording: format, spec, tensors, shapes, checksum (HMAC with `key`), guard zones, then
    the slots. `data`: the file's bytes, when already read (else read here, whole, into memory)."""
    data = read_regular(path, error=GoldenError) if data is None else data
    tensors = load_bytes(data, path)
    metadata = _metadata(data, path)
    if metadata.get("format") != FORMAT:
        raise GoldenError(f"{path}: not an fp8check golden file (metadata format is {metadata.get('format')!r})"
                          + ("; recorded by an older fp8check: record it again" if metadata.get("format") ==
                             "fp8check-golden/1" else ""))
    try:
        spec = CacheSpec.from_dict(json.loads(metadata["spec"]))
    except (KeyError, TypeError, json.JSONDecodeError, SpecError) as exc:
        raise GoldenError(f"{path}: golden metadata 'spec' is unusable ({exc})") from None
    for problem, names in (("lacks", [n for n in TENSORS if n not in tensors]),
                           ("holds unknown", sorted(set(tensors) - set(TENSORS)))):
        if names:
            raise GoldenError(f"{path}: golden file {problem} tensor(s) {', '.join(names)}")
    _check_shapes(path, spec, tensors)
    _verify(path, tensors, metadata, key)
    guards, g = tensors["guards"], guard_bytes(spec)  # `record` refuses a run that wrote outside the cache
    if not (equals_poison(guards[:g], 0) and equals_poison(guards[g:], buffer_bytes(spec) - g)):
        raise GoldenError(f"{path}: its guard zones do not hold the poison fill that every recording has:"
                          " the file was forged or damaged")
    inputs = Inputs(tensors["k"].contiguous(), tensors["slot_mapping"].contiguous(),
                    f"replayed from golden {path.name}")
    check_slots(spec, inputs.slot_mapping, str(path))
    return Golden(spec, metadata.get("producer", "?"), metadata.get("emulated") == "true", inputs,
                  tensors["kv_cache"], tensors["guards"], metadata)


def check_options(path: Path, spec: CacheSpec, given: dict[str, tuple[str, object]]) -> None:
    """Spec options typed on the command line must agree with the spec the golden file was recorded with.
    `given`: spec field -> (flag, value) for each option given explicitly; enum fields as their values."""
    recorded = {**dataclasses.asdict(spec), **spec.to_dict()}  # to_dict leaves out layers = 1
    for field, (flag, value) in given.items():
        if value != recorded[field]:
            raise GoldenError(f"{flag} {value} contradicts {path}, recorded with {field} {recorded[field]}")


def as_side(golden: Golden, path: Path, device):
    """The recorded bytes as a finished baseline Side for compare(), named after the recording producer."""
    recorded = json.loads(golden.metadata.get("producer_provenance", "{}"))
    buffer = CacheBuffer.allocate(golden.spec, device)  # its guard zones as recorded: read() checked the poison
    buffer.flat.copy_(golden.kv_cache.to(device))
    return Side(f"{golden.producer} (golden {path.name})", f"recorded in {path}", golden.emulated, buffer,
                {"recorded_by": recorded} if recorded else {})
