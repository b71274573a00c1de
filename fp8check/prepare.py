"""From option values (CLI, config, API) to what a run needs: the spec, the inputs and the device."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import inputs as inputs_mod
from .device import resolve_device
from .sources import materialize
from .spec import CacheSpec, FP8Format, Layout, ScaleFormat


DEFAULT_NUM_BLOCKS = 3


def spec_from(opts: dict, num_blocks: int | None = None) -> CacheSpec:
    """The CacheSpec the options describe (dest names); `num_blocks` overrides theirs (a replayed input's)."""
    head_dim = opts["head_dim"]
    return CacheSpec(
        num_blocks=num_blocks or opts["num_blocks"] or DEFAULT_NUM_BLOCKS, block_size=opts["block_size"],
        head_dim=head_dim, quant_block_size=opts["quant_block_size"] if opts["quant_block_size"] is not None else (128 if head_dim % 128 == 0 else head_dim),
        fp8=FP8Format(opts["fp8"]), scale_fmt=ScaleFormat(opts["scale_fmt"]),
        layout=Layout(opts["layout"]) if opts["layout"] else None, layers=opts.get("layers") or 1,
    )


def read_named_inputs(path: Path, repo: Path | None) -> inputs_mod.Inputs:
    """--input PATH or --input git:REV:PATH (read with git show; the inputs' source names the commit)."""
    file, provenance = materialize(path, repo)
    replay = inputs_mod.read_inputs(file)
    if provenance:
        replay = dataclasses.replace(replay, source=f"{replay.source} at git {provenance['revision']}"
                                                    f" = {provenance['commit']}")
    return replay


def build(opts: dict):
    """(spec, inputs, device) from the shared options. Raises SpecError / InputError / DeviceError."""
    return start(opts, background=False).result()


@dataclasses.dataclass
class Started:
    """A build whose spec and device are known and whose options, device and memory are checked; the
    inputs' device work may be still to come (inputs.PendingInputs): `result()` is build()'s (spec,
    inputs, device), with the slot mapping checked on the device while a large K is still on its way."""

    spec: CacheSpec
    device: object
    inputs: object  # Inputs, or inputs.PendingInputs

    def result(self):
        data = self.inputs
        if isinstance(data, inputs_mod.PendingInputs):
            inputs_mod.check_slots(self.spec, data.slots(), f"generated inputs ({data.source})")
            data = data.result()
        return self.spec, data, self.device


def start(opts: dict, *, background: bool = True) -> Started:
    """build(), in two steps: the checks of the options, the device and the memory now; the inputs'
    device work (and, with `background`, a large K read back or drawn in a thread meanwhile) at
    `result()`. `fp8check compare` resolves its writers in between."""
    replay = None
    if opts["input_path"] is not None:
        replay = read_named_inputs(opts["input_path"], opts.get("repo"))
    num_blocks = opts["num_blocks"]
    if num_blocks is None and replay is not None and opts["block_size"] > 0:
        num_blocks = inputs_mod.blocks_needed(replay, opts["block_size"])
    spec = spec_from(opts, num_blocks)
    device = resolve_device(opts["device"])
    # generated inputs: at most num_slots tokens plus a quarter of padding (SlotPattern.PADDED)
    check_memory(spec, replay.k.shape[0] if replay else spec.num_slots * 5 // 4 + 1, device, replay, opts)
    if replay is not None:
        inputs_mod.validate(opts["input_path"], replay.k, replay.slot_mapping, spec)
        return Started(spec, device, replay)
    return Started(spec, device, inputs_mod.start_generate(
        spec, seed=opts["seed"], slots=inputs_mod.SlotPattern(opts["slots"]),
        distribution=inputs_mod.Distribution(opts["distribution"]), inf_nan=opts["inf_nan"], device=device,
        background=background,
    ))


def check_memory(spec: CacheSpec, num_tokens: int, device, replay, opts: dict) -> None:
    """Refuse a run whose caches, diff and inputs cannot fit, naming the options, before allocating them."""
    from .cache import require_memory, run_bytes

    sizes = f"--num-blocks {spec.num_blocks}, --block {spec.block_size}, --head-dim {spec.head_dim}"
    if replay is not None and opts["num_blocks"] is None:
        top = int(replay.slot_mapping.max()) if replay.slot_mapping.numel() else 0
        sizes = f"--input {opts['input_path']}: its slot {top} makes {sizes}, and"
    require_memory(run_bytes(spec, num_tokens), device, f"{sizes} (two caches, the diff and K)")


def resolve_producers(device, names: dict[str, str], spec: CacheSpec, repo: Path | None, *,
                      isolation="default") -> dict:
    """Producers by role, resolved once the device is known: a CPU run turns Triton's interpreter mode on
    first (writers/registry.prepare), so every Triton kernel, the user's included, runs in it. Code from
    files runs in a child process under `isolation` (Limits; "default": registry.DEFAULT_ISOLATION; None:
    in this process)."""
    from .writers import registry

    registry.prepare(device)
    limits = registry.DEFAULT_ISOLATION if isolation == "default" else isolation
    return {role: registry.resolve(name, fp8=spec.fp8, repo=repo, isolation=limits) for role, name in names.items()}
