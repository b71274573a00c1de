"""Presets (`preset:PROJECT/NAME`): a project's writer or reader as calls of its released functions, declared
in its table (docs/ECOSYSTEM.md), compiled from its wheel or a `--checkout` clone, as a function with fp8check's
writer or reader signature. Each step's arguments are names of a closed vocabulary (`_writer_args`,
`_reader_args`), outputs of earlier steps, or TOML literals (`{ value = X }`, `{ none = true }`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ...core.errors import ConfigError, NotRunnableHere, ProducerError
from ...core.spec import FP8Format, Layout
from ..load import Files, LoadedFunction
from ..names import PRESET_PREFIX, Kind, Source, parse, read_source
from .table import Preset, Project, project, preset as find_preset


@dataclass(frozen=True)
class Origin:
    """A release (the pinned wheel) or a local clone of the project's repository."""

    project: Project
    checkout: Path | None = None

    def read(self, path: str) -> Source:
        if self.checkout is not None:
            full = self.checkout / self.project.checkout_prefix / path
            source = read_source(str(full), error=ProducerError)
            return Source(source.data, f"{self.project.name} checkout {self.checkout}:{path}",
                          {**source.provenance, "file": path, "checkout": str(self.checkout)})
        from ..released import Package, read_file

        p = self.project
        return read_file(Package(p.package, p.version, p.sha256, p.wheel), path)

    def describe(self) -> str:
        if self.checkout is not None:
            return f"{self.project.name} checkout {self.checkout}"
        return f"{self.project.package}=={self.project.version} (wheel)"


def _writer_args(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype) -> dict[str, Callable]:
    nb, bs, row = kv_cache.shape
    head_dim = k.shape[-1]
    groups = head_dim // quant_block_size
    live = slot_mapping >= 0

    def scales4d():  # fp32 [num_blocks, block_size, 1, groups]: each block's scale region
        flat = kv_cache.reshape(-1).view(torch.float32)
        return flat.as_strided((nb, bs, 1, groups), (bs * row // 4, groups, groups, 1),
                               flat.storage_offset() + bs * head_dim // 4)

    return {
        "k": lambda: k,
        "k.3d": lambda: k[:, None, :],
        "k.live.3d": lambda: k[live][:, None, :].contiguous(),
        "cache": lambda: kv_cache,
        "cache.pages": lambda: kv_cache.view(nb, bs * row),
        "cache.4d": lambda: kv_cache.view(nb, bs, 1, row),
        "cache.values4d": lambda: kv_cache.reshape(-1).view(fp8_dtype).as_strided(
            (nb, bs, 1, head_dim), (bs * row, head_dim, head_dim, 1)),
        "cache.scales4d": scales4d,
        "slot_mapping": lambda: slot_mapping,
        "slot_mapping.live": lambda: slot_mapping[live].contiguous(),
        "quant_block_size": lambda: quant_block_size,
        "scale_fmt": lambda: scale_fmt,
        "block_size": lambda: bs,
        "head_dim": lambda: head_dim,
        "fp8_dtype": lambda: fp8_dtype,
        # Slots as decode steps (one sequence per written token): sequence i has kv length slot % bs + 1,
        # one query token, and a one-entry block table [slot // bs]; the writer puts it at exactly its slot.
        "decode.cu_seqlen_q": lambda: torch.arange(int(live.sum()) + 1, dtype=torch.int32, device=k.device),
        "decode.kv_seqlens": lambda: (slot_mapping[live] % bs + 1).to(torch.int32),
        "decode.block_offsets": lambda: (slot_mapping[live] // bs).to(torch.int32).view(-1, 1),
        "decode.max_q_seqlen": lambda: 1,
    }


def _reader_args(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len) -> dict[str, Callable]:
    next_n = q_fp8.shape[1]
    return {
        "q_fp8": lambda: q_fp8,
        "kv_cache": lambda: kv_cache,
        "kv_cache.fp8": lambda: kv_cache.view(q_fp8.dtype),
        "weights": lambda: weights,
        "context_lens": lambda: context_lens,
        "context_lens.per_row": lambda: (context_lens.view(-1, 1) - next_n + 1 +
                                         torch.arange(next_n, device=context_lens.device)).to(torch.int32),
        "block_tables": lambda: block_tables,
        "max_model_len": lambda: max_model_len,
    }


FILLS = {"-inf": float("-inf"), "nan": float("nan"), "zero": 0.0}


def _argument(value, env: dict, vocabulary: dict[str, Callable], where: str):
    if isinstance(value, dict):
        if value.get("none"):
            return None
        if "value" in value:
            return value["value"]
        raise ProducerError(f"{where}: an argument table must be {{ value = X }} or {{ none = true }}, got {value}")
    if not isinstance(value, str):
        return value
    if value in env:
        return env[value]
    if value in vocabulary:
        return vocabulary[value]()
    raise ProducerError(f"{where}: unknown argument {value!r}; known: {', '.join(sorted(vocabulary))}, or a step's out")


def _run_steps(preset: Preset, files: Files, vocabulary: dict, env: dict):
    result = None
    for step in preset.steps:
        where = f"{preset.role} {files.label!r} step {step.call}"
        args = [_argument(a, env, vocabulary, where) for a in step.args]
        kwargs = {name: _argument(a, env, vocabulary, where) for name, a in step.kwargs}
        result = files.function(step.file, step.call).fn(*args, **kwargs)
        if len(step.out) == 1:
            env[step.out[0]] = result
        elif step.out:
            if not isinstance(result, (tuple, list)) or len(result) != len(step.out):
                raise ProducerError(f"{where}: returned {type(result).__name__}, expected {len(step.out)} values"
                                    f" ({', '.join(step.out)})")
            env.update(zip(step.out, result))
    return env[preset.returns] if preset.returns else result


def origin_for(preset: Preset, checkout: str | Path | None) -> Origin:
    """Where the preset's files come from; ProducerError when it needs a clone and none is given."""
    proj = project(preset.project)
    checkout = proj.local if checkout is None else checkout
    if checkout is None and preset.needs_checkout:
        raise ProducerError(f"preset:{preset.key}: its files are in {proj.name}'s repository only (no release holds"
                            f" them): give --checkout {proj.name}=PATH")
    if checkout is not None and not Path(checkout).is_dir():
        raise ProducerError(f"preset:{preset.key}: --checkout {proj.name}={checkout} is not a folder")
    return Origin(proj, Path(checkout) if checkout is not None else None)


def named(name: str, role: str) -> Preset | None:
    """The preset `preset:PROJECT/NAME` names (None for any other name); an unknown one is a ProducerError."""
    parsed = parse(name)
    if parsed.kind is not Kind.PRESET:
        return None
    try:
        return find_preset(parsed.body, role)
    except ConfigError as exc:
        raise ProducerError(str(exc)) from None


def project_of(name: str, role: str) -> str | None:
    """The project name of preset `name` (the key of its `--checkout`); None for any other name."""
    preset = named(name, role)
    return None if preset is None else project(preset.project).name


def checkout_of(name: str, role: str, checkouts: dict[str, str]) -> str | None:
    """The clone `--checkout PROJECT=PATH` gives for the project of preset `name` (None: its release)."""
    return checkouts.get(project_of(name, role))


def check_checkouts(checkouts: dict[str, str], named_presets: list[tuple[str, str]], where: str) -> None:
    """Every `--checkout PROJECT` is the project of one of the presets that run ((name, role) pairs): a
    misspelled one would otherwise leave that preset running from its wheel unnoticed. ConfigError."""
    used = {project_of(name, role) for name, role in named_presets} - {None}
    unknown = sorted(set(checkouts) - used)
    if unknown:
        raise ConfigError(f"--checkout {unknown[0]}: {where} runs no preset of a project named {unknown[0]!r}"
                          f" (the projects of its presets: {', '.join(sorted(used)) or 'none'})")


def fetch(name: str, role: str, checkout) -> None:
    """Read every file the preset's steps call (a wheel downloaded and hash-checked once into the cache
    folder), so that a gate fetches before its runs and names a failure once: ProducerError."""
    preset = named(name, role)
    origin = origin_for(preset, checkout)
    for step in preset.steps:
        origin.read(step.file)


def load(name: str, role: str, *, checkout=None, spec=None) -> LoadedFunction:
    """`preset:PROJECT/NAME` (a writer or reader, `role`) -> its function with fp8check's signature,
    compiled from its origin (the pinned wheel, or `checkout`, a clone of the project's repository); a
    reader's names are bound to `spec`'s FP8 format and layout, a writer's to each run's."""
    preset = named(name, role)
    origin = origin_for(preset, checkout)
    files = Files(origin.read, origin.project.table, preset.role, f"{PRESET_PREFIX}{preset.key}",
                  strip_asserts=preset.strip_asserts is not None)
    for step in preset.steps:  # compile everything now: a missing name fails at load, not mid-run
        files.function(step.file, step.call)

    if preset.role == "writer":
        def fn(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype, layout=None):
            files.rebind(FP8Format.from_torch_dtype(fp8_dtype), Layout(layout) if layout else None, kv_cache.device)
            vocabulary = _writer_args(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype)
            _run_steps(preset, files, vocabulary, {})
    else:
        files.rebind(spec.fp8, spec.layout)

        def fn(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
            files.rebind(spec.fp8, spec.layout, kv_cache.device)  # a workspace allocates where the cache is
            vocabulary = _reader_args(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len)
            rows = q_fp8.shape[0] * q_fp8.shape[1]
            env = {out: torch.full((rows, max_model_len), FILLS[fill], dtype=torch.float32, device=kv_cache.device)
                   for out, fill in preset.outputs}
            return _run_steps(preset, files, vocabulary, env)

    digest = hashlib.sha256("".join(p.get("sha256", "") for p in files.files.values()).encode()).hexdigest()
    provenance = {"loader": "preset", "preset": preset.key, "origin": origin.describe(),
                  "function": " then ".join(s.call for s in preset.steps), "sha256": digest,
                  "files": {path: f"sha256 {p.get('sha256', '?')[:16]}" for path, p in files.files.items()},
                  "bound": {name: text for c in files.functions.values()
                            for name, text in c.binding.bound.items()}}
    if preset.strip_asserts:
        provenance["asserts"] = f"compiled out (python -O): {preset.strip_asserts}"
    wheel = next((p for p in files.files.values() if "wheel" in p), None)
    if wheel is not None:
        provenance["wheel"] = f"{wheel['wheel']} sha256 {wheel['wheel_sha256']}"
    # no `rebind`: the names follow each call's format (writers) or the spec (readers), and its device
    return LoadedFunction(fn, provenance, bool(files.kernels()),
                          description=f"{preset.description} from {origin.describe()}")


def check_declared(name: str, role: str, spec) -> None:
    """NotRunnableHere (a skip in a gate) when `name` is a preset whose table declares `spec` unsupported."""
    preset = named(name, role)
    reason = preset and preset.unsupported(block_size=spec.block_size, layout=spec.layout.value,
                                           fp8=spec.fp8.value, scale_fmt=spec.scale_fmt.value)
    if reason is not None:
        raise NotRunnableHere(f"{PRESET_PREFIX}{reason}")
