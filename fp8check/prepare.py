"""From option values (CLI, config, API) to what a run needs: the spec, the inputs and the device."""

from __future__ import annotations

from . import inputs as inputs_mod
from .device import resolve_device
from .spec import CacheSpec, FP8Format, Layout, ScaleFormat


DEFAULT_NUM_BLOCKS = 3


def spec_from(opts: dict, num_blocks: int | None = None) -> CacheSpec:
    """The CacheSpec the options describe (dest names); `num_blocks` overrides theirs (a replayed input's)."""
    head_dim = opts["head_dim"]
    return CacheSpec(
        num_blocks=num_blocks or opts["num_blocks"] or DEFAULT_NUM_BLOCKS, block_size=opts["block_size"],
        head_dim=head_dim, quant_block_size=opts["quant_block_size"] or (128 if head_dim % 128 == 0 else head_dim),
        fp8=FP8Format(opts["fp8"]), scale_fmt=ScaleFormat(opts["scale_fmt"]),
        layout=Layout(opts["layout"]) if opts["layout"] else None,
    )


def build(opts: dict):
    """(spec, inputs, device) from the shared options. Raises SpecError / InputError / DeviceError."""
    replay = None
    if opts["input_path"] is not None:
        replay = inputs_mod.read_inputs(opts["input_path"])
    num_blocks = opts["num_blocks"]
    if num_blocks is None and replay is not None and opts["block_size"] > 0:
        num_blocks = inputs_mod.blocks_needed(replay, opts["block_size"])
    spec = spec_from(opts, num_blocks)
    if replay is not None:
        inputs_mod.validate(opts["input_path"], replay.k, replay.slot_mapping, spec)
        data = replay
    else:
        data = inputs_mod.generate(
            spec, seed=opts["seed"], slots=inputs_mod.SlotPattern(opts["slots"]),
            distribution=inputs_mod.Distribution(opts["distribution"]), inf_nan=opts["inf_nan"],
        )
    return spec, data, resolve_device(opts["device"])
