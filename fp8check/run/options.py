"""The one table of options: each one's CLI flag, config key, type, range or choices, default and help.

The click CLI is built from it, and configs and the Python API validate with the same rules, so a value the
CLI refuses is refused everywhere. A config value must also have the option's TOML type: `seed = 1.5` must
not quietly become 1.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from ..core.device import DEVICE_CHOICES
from ..core.errors import ConfigError
from ..core.input_kinds import Distribution, SlotPattern
from ..core.isolation import DEFAULT_TIMEOUT_S
from ..core.spec import MAX_CODE_DISTANCE, FP8Format, Layout, ScaleFormat


def _values(enum_cls: type[enum.Enum]) -> tuple[str, ...]:
    return tuple(m.value for m in enum_cls)


INT64 = (-(2**63), 2**63 - 1)
# a config value's TOML types and how an error names them
TOML_TYPES = {int: ((int,), "an integer"), float: ((int, float), "a number"), str: ((str,), "a string"),
              bool: ((bool,), "true or false"), Path: ((str, Path), "a path")}


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange, refusing nan and infinities (nan compares false with every bound)."""

    def convert(self, value, param, ctx):
        converted = super().convert(value, param, ctx)
        if not math.isfinite(converted):
            self.fail(f"{value} is not a finite number.", param, ctx)
        return converted


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
    many: bool = False  # a list of `kind`: a TOML list, or comma-separated text on the command line
    name: str | None = None  # the config key and flag where `key` must differ (two commands' own `slots`)
    minimum_open: bool = False  # the minimum itself is refused (a timeout of 0 s)
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + (self.name or self.key).replace("_", "-")

    def click_type(self):
        if self.choices is not None:
            return click.Choice(list(self.choices))
        if self.kind is int:
            return click.IntRange(min=self.minimum, max=self.maximum) if self.minimum is not None else click.INT
        if self.kind is float:
            return FiniteFloatRange(min=self.minimum, max=self.maximum, min_open=self.minimum_open)
        return click.Path(path_type=Path) if self.kind is Path else click.STRING

    def click_option(self):
        if self.kind is bool:
            return click.option(self.flag, self.dest, is_flag=True, default=False, help=self.help)
        default = ",".join(map(str, self.default)) if self.many and self.default is not None else self.default
        kind = click.STRING if self.many else self.click_type()  # a list: comma-separated, validated later
        return click.option(self.flag, self.dest, type=kind, default=default, metavar=self.metavar,
                            show_default=self.show_default and default is not None, help=self.help)

    def label(self, where: str, value: Any) -> str:
        """`--ctx '64,abc'` for the command line; `FILE [case]: ctx` for a config."""
        return f"{self.flag} {value!r}" if where == "" else f"{where}: {self.name or self.key}"

    def validate(self, value: Any, where: str) -> Any:
        """The value as the CLI would have it, or a ConfigError naming `where` and this key."""
        if self.many:
            text = value
            if isinstance(value, str):  # the command line's comma-separated text
                value = [item.strip() for item in value.split(",") if item.strip()]
            one = replace(self, default=None, many=False)
            converted = []
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if self.kind is int and isinstance(item, str):
                    try:
                        item = int(item)
                    except ValueError:
                        raise ConfigError(f"{self.label(where, text)}: expected a comma-separated list of integers"
                                          ) from None
                converted.append(one.validate(item, where))
            return tuple(converted)
        if isinstance(value, enum.Enum):
            value = value.value
        if value is None and self.default is None:  # an optional option left unset
            return None
        expected, wanted = TOML_TYPES[self.kind]
        if not isinstance(value, expected) or (self.kind is not bool and isinstance(value, bool)):
            raise ConfigError(f"{self.label(where, value)}: must be {wanted}" if where == "" else
                              f"{where}: {self.name or self.key} must be {wanted}, got {value!r}")
        if self.kind is bool:
            return value
        try:
            converted = self.click_type().convert(value, None, None)
        except click.BadParameter as exc:
            raise ConfigError(f"{self.label(where, value)}: {exc.message}" if where == "" else
                              f"{where}: {self.name or self.key} = {value!r}: {exc.message}") from None
        return float(converted) if self.kind is float else converted


def _table(*table: Option) -> dict[str, Option]:
    return {o.key: o for o in table}


SPEC = _table(  # the cache, the inputs and the device: every command
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
    Option("seed", "seed", int, 0, minimum=INT64[0], maximum=INT64[1]),
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
    Option("allow_unpinned", "allow_unpinned", bool, False,
           "Run released code (pkg:, aiter-src:pkg:, presets) of a version no project table pins; its wheel's"
           " sha256 is then recorded and printed, not checked."),
)
BUDGET = _table(
    Option("max_diff_bytes", "max_diff_bytes", int, 0,
           "Pass with up to N differing bytes (those --max-code-distance excuses not counted); 0: exact.", minimum=0),
    Option("max_diff_fraction", "max_diff_fraction", float, 0.0,
           "Pass with up to this fraction of the cache's bytes differing; 0: exact.", minimum=0, maximum=1),
    Option("max_code_distance", "max_code_distance", int, 0,
           f"Excuse differing FP8 value bytes at most D codes apart (at most {MAX_CODE_DISTANCE}; a NaN"
           " against a number is never excused); 0: excuse none.", minimum=0, maximum=MAX_CODE_DISTANCE),
)
CONVENTIONS = _table(
    Option("pad_slot", "pad_slot", int, -1,
           "Padding convention: -1, padding tokens (slot -1) write nothing (vLLM, aiter); N >= 0, they are"
           " sent to dummy slot N, reserved for them, which they may write (SGLang).", minimum=-1),
)
ORIGINS = _table(  # where named code comes from; never swept by a gate
    Option("checkout", "checkouts", str, (),
           "PROJECT=PATH: run PROJECT's presets (preset:PROJECT/NAME) from this clone of its repository"
           " instead of its released wheel (comma-separated, or the option repeated in `gate`).", many=True,
           show_default=False),
)


def checkouts(items) -> dict[str, str]:
    """`checkout` values (`PROJECT=PATH` each) -> {project: path}; a ConfigError names a malformed one."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, path = (part.strip() for part in str(item).partition("="))
        if not sep or not name or not path:
            raise ConfigError(f"--checkout {item!r}: expected PROJECT=PATH, e.g. flaggems=../FlagGems")
        if name in out and out[name] != path:
            raise ConfigError(f"--checkout {name}: given twice ({out[name]} and {path})")
        out[name] = path
    return out


RUN = _table(
    Option("interpreter", "interpreter", str, "grid",
           "How a writer's Triton grids run on the CPU: grid, all programs of a grid at once where that gives"
           " the bytes of a sequential run (the JSON's provenance says how each grid ran); sequential,"
           " Triton's interpreter program by program.", choices=("grid", "sequential")),
)
REPORT = _table(
    Option("map_blocks", "map_blocks", int, (),
           "Blocks the HTML report maps byte by byte (comma-separated) [default: the first 4 that differ].",
           many=True, minimum=0, show_default=False),
)
PRODUCERS = _table(  # producer names are checked when they are resolved (registry.resolve), not here
    Option("baseline", "baseline", str, "auto"),
    Option("candidate", "candidate", str, "triton"),
    Option("buggy", "buggy", str, "triton-buggy"),
    Option("fixed", "fixed", str, "triton"),
    Option("producer", "producer", str, "reference"),
)
PARITY = _table(
    Option("ctx", "ctx", int, (128, 512, 1024, 2048, 2049, 4096, 8192, 16384),
           "Context lengths, one table row each (comma-separated).", minimum=1, many=True),
    Option("writers", "writers", str, ("triton-buggy", "triton"),
           "Writers, one column each (comma-separated producer names, file:PATH:FUNC, ...).", many=True),
    Option("reader", "reader", str, "reference",
           "reference (exact, float64), aiter, file:PATH:FUNC or vllm-file:PATH:FUNC."),
    Option("topk", "topk", int, 2048, minimum=1),
    Option("next_n", "next_n", int, 1,
           "Query rows per sequence (2: MTP; row n sees ctx - next_n + n + 1 tokens).", minimum=1),
    Option("heads", "heads", int, None, "Query heads [default: 64, or --input's].", minimum=1),
    Option("rtol", "rtol", float, 1e-3, "bad/N: relative tolerance.", minimum=0),
    Option("atol", "atol", float, 1e-3, "bad/N: absolute tolerance.", minimum=0),
    Option("min_recall", "min_recall", float, 1.0,
           "Pass when every non-vacuous row of every writer not expected to fail has recall@K >= this.",
           minimum=0, maximum=1),
    Option("expect_fail", "expect_fail", str, (), "Writers expected to fail (comma-separated).", many=True,
           show_default=False),
    Option("parity_slots", "slots", str, "sequential", "Block table in order, or shuffled.",
           choices=(SlotPattern.SEQUENTIAL.value, SlotPattern.SHUFFLED.value), name="slots"),
)
ISOLATION = _table(  # how code under test runs: every command that runs it
    Option("timeout", "timeout_s", float, DEFAULT_TIMEOUT_S,
           "Kill code under test (a writer or reader from a file, a checkout or a release) that runs longer"
           " than this; its case is then an error (exit 2).", minimum=0, minimum_open=True, metavar="SECONDS"),
)
COMPARE_KEYS = (*SPEC, "baseline", "candidate", *BUDGET, *CONVENTIONS, *ORIGINS, *RUN, *REPORT)
TABLE_KEYS = (*SPEC, "baseline", "buggy", "fixed", *ORIGINS, *RUN)
# parity: the spec and input options but --num-blocks (the contexts size the cache), --specials-inf-nan and
# --layers, with its own slot choices (a block table in order or shuffled); --allow-unpinned last, not in ids
PARITY_KEYS = (*(k for k in SPEC if k not in ("num_blocks", "specials_inf_nan", "slots", "layers", "allow_unpinned")),
               "baseline", *(k for k in PARITY if k != "parity_slots"), "slots", *ORIGINS, "allow_unpinned")
# the keys a parity gate case takes (`fp8check parity`'s but --repo), in the order its id names them
PARITY_CASE_KEYS = ("ctx", "heads", "head_dim", "block", "qbs", "topk", "next_n", "fp8", "scale_fmt", "layout", "slots",
                    "inputs", "input", "seed", "writers", "baseline", "reader", "rtol", "atol", "min_recall",
                    "expect_fail", "device")
ALL = {**SPEC, **BUDGET, **CONVENTIONS, **ORIGINS, **RUN, **REPORT, **PRODUCERS, **PARITY, **ISOLATION}
COMMAND_LINE = ""  # `where` of values typed on the command line: errors name the flag
COMMAND_KEYS = {"compare": COMPARE_KEYS, "table": TABLE_KEYS, "record": (*SPEC, "producer", *ORIGINS, *RUN),
                "parity": PARITY_KEYS}


def option(key: str, command: str = "") -> Option:
    """The option of a config key; parity's `slots` is its own (a block table's order)."""
    return ALL["parity_slots"] if command == "parity" and key == "slots" else ALL[key]


def defaults(keys, command: str = "") -> dict[str, Any]:
    return {key: option(key, command).default for key in keys}


def validate(values: dict[str, Any], known: tuple[str, ...], where: str, command: str = "") -> dict[str, Any]:
    """Config keys -> validated values; unknown keys are refused with the known ones listed."""
    unknown = [key for key in values if key not in known]
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return {key: option(key, command).validate(value, where) for key, value in values.items()}
