"""One path from a request to a run: the spec, the inputs, the device and the producers of every role
(docs/ARCHITECTURE.md, "One path from request to run").
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..core import inputs as inputs_mod
from . import options, parity_inputs
from ..code.projects.compose import check_checkouts, check_declared, checkout_of
from ..core.cache import input_bytes, require_memory, run_bytes
from ..core.device import resolve_device
from ..core.errors import UsageError
from ..code.names import Kind, materialize, parse
from ..core.spec import CacheSpec, FP8Format, Layout, ScaleFormat, default_quant_block_size
from ..producers import golden, registry

DEFAULT_NUM_BLOCKS = 3
KNOWN_BAD = ("triton-buggy",)  # the seed's uint8 wrapper: parity's default columns expect it to fail
ROLES = {"compare": ("baseline", "candidate"), "table": ("baseline", "buggy", "fixed"), "record": ("producer",)}
INPUT_FILE_EXCLUDES = ("seed", "slots", "inputs", "specials_inf_nan")  # --input replays its own inputs
# with a golden baseline the recording holds the spec and the inputs: stated spec keys must agree with it,
# input keys cannot be stated at all
GOLDEN_SPEC_KEYS = ("num_blocks", "block", "head_dim", "qbs", "fp8", "scale_fmt", "layout", "layers")
GOLDEN_INPUT_KEYS = (*INPUT_FILE_EXCLUDES, "input")


@dataclasses.dataclass(frozen=True)
class Request:
    command: str  # compare, table, record or parity
    values: dict[str, Any]  # every option of the command under its config key, validated, defaults filled
    stated: frozenset[str]  # the keys given explicitly (command line, gate case, API)

    @classmethod
    def of(cls, command: str, given: dict[str, Any], *, where: str, stated=None) -> "Request":
        """Validate `given` (config keys) against the command's options; the rest take their defaults."""
        keys = options.COMMAND_KEYS[command]
        values = {**options.defaults(keys, command), **options.validate(given, keys, where, command)}
        return cls(command, values, frozenset(given if stated is None else stated))

    def flag(self, key: str) -> str:
        return options.option(key, self.command).flag

    def budget(self):
        from ..core.budget import Budget
        return Budget(**{key: self.values[key] for key in options.BUDGET})

    @property
    def id(self) -> str:
        return run_id(self.command, self.values)


@dataclasses.dataclass(frozen=True)
class Prepared:
    spec: CacheSpec
    inputs: Any  # inputs.Inputs, or parity_inputs.QueryInputs
    device: Any  # torch.device
    sides: dict[str, Any]  # role -> Producer, or a golden baseline's recorded Side
    reader: Any = None  # parity: the reader under test
    config: Any = None  # parity: its ParityConfig

    def run_parity(self, progress=None):
        """A parity run (prepare_parity's): the baseline and the writer columns read by the reader."""
        from .parity import run_parity
        writers = [side for role, side in self.sides.items() if role != "baseline"]
        return run_parity(self.spec, self.config, baseline=self.sides["baseline"], writers=writers,
                          reader=self.reader, inputs=self.inputs, device=self.device, progress=progress)


def spec_of(values: dict, num_blocks: int | None = None) -> CacheSpec:
    """The CacheSpec the values describe (config keys); `num_blocks` overrides theirs."""
    head_dim, qbs = values["head_dim"], values["qbs"]
    return CacheSpec(
        num_blocks=num_blocks or values.get("num_blocks") or DEFAULT_NUM_BLOCKS, block_size=values["block"],
        head_dim=head_dim, quant_block_size=qbs if qbs is not None else default_quant_block_size(head_dim),
        fp8=FP8Format(values["fp8"]), scale_fmt=ScaleFormat(values["scale_fmt"]),
        layout=Layout(values["layout"]) if values["layout"] else None, layers=values.get("layers") or 1,
    )


def _spec_part(v: dict) -> str:
    if v.get("input") is not None:
        shape = f"b{v['block']}-h{v['head_dim']}-q{v['qbs'] or 'auto'}-n{v['num_blocks'] or 'auto'}"
        return f"{v['fp8']}-{v['scale_fmt']}:{shape}-{v['layout'] or 'auto'}:input={Path(v['input']).name}"
    spec = spec_of(v)
    shape = f"b{spec.block_size}-h{spec.head_dim}-q{spec.quant_block_size}-n{spec.num_blocks}-{spec.layout.value}"
    shape += f"-L{spec.layers}" if spec.layers > 1 else ""
    inputs = f"{v['inputs']}{'+infnan' if v['specials_inf_nan'] else ''}-{v['slots']}-s{v['seed']}"
    inputs += f"-pad{v['pad_slot']}" if v.get("pad_slot", -1) >= 0 else ""
    device = "" if v["device"] == "auto" else f":{v['device']}"
    return f"{spec.fp8.value}-{spec.scale_fmt.value}:{shape}:{inputs}{device}"


def run_id(command: str, v: dict, *, candidate: bool = True) -> str:
    """The id of a compare, table or parity run, from its parameters only: a gate case's id, and the
    name of a single command's case in JSON and JUnit.
    - `compare:CANDIDATE~BASELINE:FP8-SCALES:SHAPE[-L<layers>]:INPUTS[-pad<slot>][:BUDGET]`; a golden baseline's recording brings
      its spec and inputs: `compare:CANDIDATE~golden:NAME[:BUDGET]`; without the candidate (a pytest
      test's own writer stands there): `vs-BASELINE:...`;
    - `table:BUGGY+FIXED~BASELINE:FP8-SCALES:SHAPE:INPUTS`;
    - `parity:KEY=VALUE:...` over options.PARITY_CASE_KEYS."""
    if command == "table":
        return f"table:{v['buggy']}+{v['fixed']}~{v['baseline']}:{_spec_part(v)}"
    if command == "parity":
        return "parity:" + ":".join(f"{k}={shown(v[k])}" for k in options.PARITY_CASE_KEYS if v.get(k) is not None)
    baseline = parse(v["baseline"])
    names = {"max_diff_bytes": "bytes", "max_diff_fraction": "frac", "max_code_distance": "dist"}
    budget = "-".join(f"{name}{v[key]:g}" for key, name in names.items() if v[key])
    against = (f"golden:{Path(baseline.path).name}" if baseline.kind is Kind.GOLDEN
               else f"{v['baseline']}:{_spec_part(v)}") + (f":budget-{budget}" if budget else "")
    return f"compare:{v['candidate']}~{against}" if candidate else f"vs-{against}"


def shown(value) -> str:
    """A value in an id or a matrix axis: a list as comma-separated items."""
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def prepare(request: Request, *, isolation="default", given_inputs=None, producers: dict | None = None) -> Prepared:
    """Spec, inputs, device and the producers of the command's roles. `given_inputs`: K and slots from the
    caller (the API); `producers`: roles already resolved (the API's writer functions)."""
    v = request.values
    producers = dict(producers or {})
    if parse(v.get("baseline", "")).kind is Kind.GOLDEN:
        spec, data, device, producers["baseline"] = _golden(request)
    else:
        device = resolve_device(v["device"])
        spec, data = _spec_and_inputs(request, given_inputs, device)
        data = data.to(device)
    names = {role: v[role] for role in ROLES[request.command] if role not in producers}
    resolved = resolve_producers(names, spec, v, checkouts_of(v, request.command), isolation)
    return Prepared(spec, data, device, {**producers, **resolved})


def _spec_and_inputs(request: Request, given_inputs, device):
    """The spec and the inputs (given, replayed or generated), with the memory they need checked first."""
    v = request.values
    if given_inputs is None and v["input"] is None:
        spec = spec_of(v)
        # generated inputs: at most num_slots tokens plus a quarter of padding (SlotPattern.PADDED)
        _check_memory(spec, spec.num_slots * 5 // 4 + 1, device, request, None)
        data = inputs_mod.generate(spec, seed=v["seed"], slots=inputs_mod.SlotPattern(v["slots"]),
                                   distribution=inputs_mod.Distribution(v["inputs"]), inf_nan=v["specials_inf_nan"],
                                   device=device)
        inputs_mod.check_slots(spec, data.slot_mapping, f"generated inputs ({data.source})")
        return spec, data
    if given_inputs is not None:
        inputs_mod.validate("k", given_inputs.k, given_inputs.slot_mapping, None)
        replay, name = given_inputs, "k"
    else:
        clash = [key for key in INPUT_FILE_EXCLUDES if key in request.stated]
        if clash:
            raise UsageError(f"{request.flag(clash[0])} cannot be combined with --input: the file's inputs"
                             " are replayed")
        # --input PATH or --input git:REV:PATH (read with git show; the inputs' source names the commit)
        file, provenance = materialize(Path(v["input"]), v["repo"])
        replay, name = inputs_mod.read_inputs(file), v["input"]
        if provenance:
            replay = dataclasses.replace(replay, source=f"{replay.source} at git {provenance['revision']}"
                                                        f" = {provenance['commit']}")
    spec = spec_of(v, v["num_blocks"] or inputs_mod.blocks_needed(replay, v["block"]))
    _check_memory(spec, replay.k.shape[0], device, request, replay)
    inputs_mod.validate(name, replay.k, replay.slot_mapping, spec)
    return spec, replay


def _golden(request: Request):
    """(spec, inputs, device, baseline Side) of golden:FILE: the recorded spec, inputs and bytes."""
    v = request.values
    path_text = parse(v["baseline"]).path
    if not path_text:
        raise UsageError("--baseline golden:FILE needs a file")
    clash = [key for key in GOLDEN_INPUT_KEYS if key in request.stated]
    if clash:
        raise UsageError(f"{request.flag(clash[0])} cannot be combined with --baseline {v['baseline']}: the"
                         " recorded inputs are replayed")
    recorded, path, origin = golden.load_trusted(path_text, v["repo"])
    golden.check_options(path, recorded.spec, {options.option(key).dest: (request.flag(key), v[key])
                                               for key in GOLDEN_SPEC_KEYS if key in request.stated})
    device = resolve_device(v["device"])
    side = golden.as_side(recorded, path, device)
    if origin:
        side = dataclasses.replace(side, provenance={**side.provenance, "golden": path_text, **origin})
    return recorded.spec, recorded.inputs.to(device), device, side


def _check_memory(spec: CacheSpec, num_tokens: int, device, request: Request, replay) -> None:
    """Refuse a run whose caches, diff and inputs cannot fit, naming the options, before allocating them."""
    sizes = (f"--num-blocks {spec.num_blocks}, --block {spec.block_size}, --head-dim {spec.head_dim}"
             + (f", --layers {spec.layers}" if spec.layers > 1 else ""))
    v = request.values
    if replay is not None and v["num_blocks"] is None:
        top = int(replay.slot_mapping.max()) if replay.slot_mapping.numel() else 0
        where = f"--input {v['input']}" if v.get("input") is not None else "k"
        sizes = f"{where}: its slot {top} makes {sizes}, and"
    require_memory(run_bytes(spec, num_tokens), device, f"{sizes} (two caches, the diff and K)")
    if replay is None and device.type != "cpu" and v["inputs"] != "hashed":  # K drawn on the CPU, then copied
        require_memory(input_bytes(spec, num_tokens), "cpu", f"{sizes}: drawing K for --inputs {v['inputs']}")


CODE_KEYS = {"baseline": "writer", "candidate": "writer", "buggy": "writer", "fixed": "writer", "producer": "writer",
             "writers": "writer", "reader": "reader"}  # the keys that name code, and the role of what they name


def named_code(values: dict) -> list[tuple[str, str]]:
    """(name, role) of every writer and reader the values name (a request's, a gate case's)."""
    given = {key: values.get(key) for key in CODE_KEYS}
    listed = {key: value if isinstance(value, (list, tuple)) else (value,) for key, value in given.items()}
    return [(name, role) for key, role in CODE_KEYS.items() for name in listed[key] if isinstance(name, str)]


def checkouts_of(v: dict, command: str) -> dict[str, str]:
    """The request's `checkout` values as {project: clone}, each the project of a preset the run names."""
    found = options.checkouts(v.get("checkout"))
    if found:
        check_checkouts(found, named_code(v), f"this {command}")
    return found


def resolve_producers(names: dict[str, str], spec: CacheSpec, v: dict, checkouts: dict[str, str], isolation) -> dict:
    """Producers by role, with the request values' repo, allow_unpinned and interpreter. Code from files runs in a child
    under `isolation` (Limits; "default": the registry's; None: in this process). A preset runs from its project's clone
    in `checkouts` (else the repo, else its release); a spec its table declares unsupported is NotRunnableHere before
    anything runs."""
    limits = registry.DEFAULT_ISOLATION if isolation == "default" else isolation
    for name in names.values():
        check_declared(name, "writer", spec)
    return {role: dataclasses.replace(registry.resolve(name, fp8=spec.fp8, isolation=limits,
                                                       allow_unpinned=v["allow_unpinned"],
                                                       repo=checkout_of(name, "writer", checkouts) or v["repo"]),
                                      interpreter=v.get("interpreter", "grid"))
            for role, name in names.items()}


def prepare_parity(request: Request, *, isolation="default") -> Prepared:
    """A parity run: the cache the contexts need, K/Q/weights drawn or read, the baseline, writers and reader.
    Its memory is checked, naming its sizes, before anything is drawn or allocated."""
    v = dict(request.values)
    if not {"writers", "expect_fail"} & request.stated:  # the default columns: the seed's buggy and fixed wrappers,
        v["expect_fail"] = tuple(name for name in v["writers"] if name in KNOWN_BAD)  # the buggy one expected to fail
    config = parity_inputs.ParityConfig(tuple(v["ctx"]), v["topk"], v["next_n"], v["rtol"], v["atol"],
                                        v["min_recall"], frozenset(v["expect_fail"]))
    spec = parity_inputs.cache_spec(config, spec_of(v))
    shuffled, device = v["slots"] == "shuffled", resolve_device(v["device"])
    heads = v["heads"] or parity_inputs.DEFAULT_HEADS
    needed = parity_inputs.memory_bytes(spec, config, heads=heads, writers=len(v["writers"]))
    sizes = (f"--ctx {','.join(map(str, config.ctx))}, --heads {heads}, --head-dim {spec.head_dim}, --block"
             f" {spec.block_size}, --next-n {config.next_n}, --topk {config.topk}, {len(v['writers'])} writer(s)")
    for where in dict.fromkeys((device.type, "cpu")):  # inputs are drawn on the CPU, then copied; in order
        require_memory(needed, where if where == "cpu" else device, f"{sizes} (caches, K, Q, logits)")
    if v["input"] is not None:
        data = parity_inputs.read(Path(v["input"]), spec, config, heads=v["heads"], seed=v["seed"], shuffled=shuffled)
    else:
        data = parity_inputs.generate(spec, config, heads=heads, seed=v["seed"], shuffled=shuffled,
                                      distribution=inputs_mod.Distribution(v["inputs"]))
    if not v["writers"] and v["reader"] == "reference":
        raise UsageError("--writers: name at least one writer (with no writer, name a --reader to check on the"
                         " baseline's bytes)")
    checkouts = checkouts_of(v, "parity")
    # the reader first: a spec its preset declares unsupported is refused before any writer is resolved
    reader = registry.resolve_reader(v["reader"], spec=spec, allow_unpinned=v["allow_unpinned"],
                                     repo=checkout_of(v["reader"], "reader", checkouts) or v["repo"],
                                     isolation=registry.DEFAULT_ISOLATION if isolation == "default" else isolation)
    names = {"baseline": v["baseline"], **{f"w{i}": n for i, n in enumerate(v["writers"])}}
    return Prepared(spec, data, device, resolve_producers(names, spec, v, checkouts, isolation), reader, config)
