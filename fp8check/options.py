"""The one table of options: each one's CLI flag, config key, type, range or choices, default and help.

The click CLI builds its options from this table, and TOML configs (`table --config`, `gate`) and the
Python API validate their values with the same rules, so a value the CLI refuses is refused everywhere,
with the file, the case and the key named. A config value must also have the option's TOML type: the
CLI parses text, a config holds typed values, and `seed = 1.5` must not quietly become 1.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .errors import ConfigError
from .spec import MAX_CODE_DISTANCE


def _values(enum_cls: type[enum.Enum]) -> tuple[str, ...]:
    return tuple(m.value for m in enum_cls)


@dataclass(frozen=True)
class Option:
    key: str  # config key and API keyword: `block`
    dest: str  # the name build() and the click command see: `block_size`
    kind: type  # int, float, str, bool or Path
    default: Any = None
    help: str | None = None
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    show_default: bool = True

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")

    def click_type(self):
        if self.choices is not None:
            return click.Choice(list(self.choices))
        if self.kind is int:
            return click.IntRange(min=self.minimum, max=self.maximum) if self.minimum is not None else click.INT
        if self.kind is float:
            return click.FloatRange(min=self.minimum, max=self.maximum)
        if self.kind is Path:
            return click.Path(path_type=Path)
        return click.STRING

    def click_option(self):
        if self.kind is bool:
            return click.option(self.flag, self.dest, is_flag=True, default=False, help=self.help)
        return click.option(self.flag, self.dest, type=self.click_type(), default=self.default,
                            show_default=self.show_default and self.default is not None, help=self.help)

    def validate(self, value: Any, where: str) -> Any:
        """The value as the CLI would have it, or a ConfigError naming `where` and this key."""
        if isinstance(value, enum.Enum):
            value = value.value
        if value is None and self.default is None:  # an optional option left unset
            return None
        expected = {int: (int,), float: (int, float), str: (str,), bool: (bool,), Path: (str, Path)}[self.kind]
        if not isinstance(value, expected) or (self.kind is not bool and isinstance(value, bool)):
            wanted = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
                      Path: "a path"}[self.kind]
            raise ConfigError(f"{where}: {self.key} must be {wanted}, got {value!r}")
        if self.kind is bool:
            return value
        try:
            converted = self.click_type().convert(value, None, None)
        except click.BadParameter as exc:
            raise ConfigError(f"{where}: {self.key} = {value!r}: {exc.message}") from None
        return float(converted) if self.kind is float else converted


def _spec_options() -> list[Option]:
    from .device import DEVICE_CHOICES
    from .input_kinds import Distribution, SlotPattern
    from .spec import FP8Format, Layout, ScaleFormat

    return [
        Option("block", "block_size", int, 64, "Tokens per cache block.", minimum=1),
        Option("head_dim", "head_dim", int, 128, minimum=1),
        Option("num_blocks", "num_blocks", int, None, "Cache blocks [default: 3, or what --input needs].", minimum=1),
        Option("qbs", "quant_block_size", int, None,
               "Quant group size [default: 128 when it divides head_dim, else head_dim].", minimum=1),
        Option("fp8", "fp8", str, "e4m3fn", choices=_values(FP8Format)),
        Option("scale_fmt", "scale_fmt", str, "ue8m0", choices=_values(ScaleFormat)),
        Option("layout", "layout", str, None, "Value layout [default: shuffle when --block > 1, else linear].",
               choices=_values(Layout)),
        Option("layers", "layers", int, 1,
               "Hand the writer layer L // 2 of an L-layer buffer as a strided per-layer view; the other layers"
               " are poisoned and a write there is a write outside the cache.", minimum=1),
        Option("seed", "seed", int, 0),
        Option("slots", "slots", str, "sequential", choices=_values(SlotPattern)),
        Option("inputs", "distribution", str, "normal",
               "How K is drawn: adversarial inputs for the numerics (ue8m0-boundary, ties, tiny, ...).",
               choices=_values(Distribution)),
        Option("specials_inf_nan", "inf_nan", bool, False,
               "Let --inputs specials (and mixed) put inf and NaN in K; the real writers disagree on them."),
        Option("input", "input_path", Path, None,
               "Replay a safetensors file holding k (bf16) and optionally slot_mapping (int64)."),
        Option("device", "device", str, "auto", choices=DEVICE_CHOICES),
        Option("repo", "repo", Path, None,
               "Git repository that git:REV:PATH names are read from [default: the current directory's]."),
    ]


def _budget_options() -> list[Option]:
    return [
        Option("max_diff_bytes", "max_diff_bytes", int, 0,
               "Pass with up to N differing bytes (those --max-code-distance excuses not counted); 0: exact.",
               minimum=0),
        Option("max_diff_fraction", "max_diff_fraction", float, 0.0,
               "Pass with up to this fraction of the cache's bytes differing; 0: exact.", minimum=0, maximum=1),
        Option("max_code_distance", "max_code_distance", int, 0,
               f"Excuse differing FP8 value bytes at most D codes apart (at most {MAX_CODE_DISTANCE}; a NaN against a"
               " number is never excused); 0: excuse none.", minimum=0, maximum=MAX_CODE_DISTANCE),
    ]


def _convention_options() -> list[Option]:
    return [
        Option("pad_slot", "pad_slot", int, -1,
               "Padding convention: -1, padding tokens (slot -1) write nothing (vLLM, aiter); N >= 0, they are"
               " sent to dummy slot N, reserved for them, which they may write (SGLang).", minimum=-1),
    ]


SPEC = {o.key: o for o in _spec_options()}  # the cache, the inputs and the device: every command
BUDGET = {o.key: o for o in _budget_options()}
CONVENTIONS = {o.key: o for o in _convention_options()}
PRODUCERS = {  # producer names are checked when they are resolved (registry.resolve), not here
    "baseline": Option("baseline", "baseline", str, "auto"),
    "candidate": Option("candidate", "candidate", str, "triton"),
    "buggy": Option("buggy", "buggy", str, "triton-buggy"),
    "fixed": Option("fixed", "fixed", str, "triton"),
}
COMPARE_KEYS = (*SPEC, "baseline", "candidate", *BUDGET, *CONVENTIONS)
TABLE_KEYS = (*SPEC, "baseline", "buggy", "fixed")
ALL = {**SPEC, **BUDGET, **CONVENTIONS, **PRODUCERS}


def defaults(keys) -> dict[str, Any]:
    """key -> default of the given options."""
    return {key: ALL[key].default for key in keys}


def validate(values: dict[str, Any], known: tuple[str, ...], where: str) -> dict[str, Any]:
    """Config keys -> validated values; unknown keys are refused with the known ones listed."""
    unknown = [key for key in values if key not in known]
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return {key: ALL[key].validate(value, where) for key, value in values.items()}


def to_dests(values: dict[str, Any]) -> dict[str, Any]:
    """Config keys -> the dest names build() takes."""
    return {ALL[key].dest: value for key, value in values.items()}


def from_dests(opts: dict[str, Any]) -> dict[str, Any]:
    """The dest names of the options among `opts` -> config keys (other entries are left out)."""
    by_dest = {o.dest: o.key for o in ALL.values()}
    return {by_dest[dest]: value for dest, value in opts.items() if dest in by_dest}


def click_options(keys):
    """A decorator adding the click options of `keys`, in order."""

    def decorate(fn):
        for key in reversed(list(keys)):
            fn = ALL[key].click_option()(fn)
        return fn

    return decorate
