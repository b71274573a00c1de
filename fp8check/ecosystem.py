"""`fp8check ecosystem`: every project's preset writer against the exact reference, every preset reader
against the exact reader, over a declared sweep (configs/ecosystem.toml), in one matrix.

Writers run on fresh poisoned caches next to `reference` (gate.check_compare: diff, diagnosis); readers
read the reference writer's bytes next to fp8check's exact reader (parity.run_parity's reader check).
A preset that cannot run a spec (a format or layout its code does not support, files only in a clone
that was not given) is a run `skipped` with its reason, never silently left out. Known upstream bugs are
declared `expect = "different"` in the config: such a run that agrees is reported as `unexpected`, so a
CI job notices when the bug is fixed.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from .errors import ConfigError, UserError, first_line
from .writers.projects.compose import PRESET_PREFIX, origin_for
from .writers.projects.table import Preset, project, preset as find_preset
from .spec import CacheSpec, FP8Format, Layout, ScaleFormat

STATUSES = ("identical", "different", "pass", "fault", "skipped", "error")  # a run's status, in JSON
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Expect:
    """A known upstream bug: runs of `preset` (role) matching every given field are expected to differ."""

    preset: str
    role: str
    where: tuple  # (field, value or list of values) pairs a run must match
    reason: str

    def matches(self, record: dict) -> bool:
        """Every given field equals the run's (a list: one of its values)."""
        return (record["preset"] == self.preset and record["role"] == self.role
                and all(record.get(k) in (v if isinstance(v, list) else [v]) for k, v in self.where))


@dataclass(frozen=True)
class EcosystemConfig:
    writers: tuple[str, ...]
    readers: tuple[str, ...]
    block_sizes: tuple[int, ...] = (1, 16, 64)
    layouts: tuple[str, ...] = ("linear", "shuffle")
    fp8: tuple[str, ...] = ("e4m3fn", "e4m3fnuz")
    scale_fmts: tuple[str, ...] = ("ue8m0", "fp32")
    inputs: tuple[str, ...] = ("normal",)
    next_n: tuple[int, ...] = (1, 2)
    tokens: int = 128  # K rows per writer run
    head_dim: int = 128
    ctx: int = 2048  # tokens of the reader runs' one sequence
    topk: int = 512
    heads: int = 4
    seed: int = 0
    reader_scale_fmt: str = "ue8m0"
    expects: tuple[Expect, ...] = ()
    checkouts: dict = field(default_factory=dict)  # project -> a clone of its repository


def _list(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (value,)


CONFIG_KEYS = {"writers", "readers", "block", "layout", "fp8", "scale_fmt", "inputs", "next_n", "tokens", "head_dim",
               "ctx", "topk", "heads", "seed", "reader_scale_fmt"}
EXPECT_FIELDS = {"block_size", "layout", "fp8", "scale_fmt", "inputs", "next_n"}


def read_config(path: Path, checkouts: dict[str, str]) -> EcosystemConfig:
    """The [ecosystem] section and the [[expect]] list of a TOML file (a path or a shipped config's name)."""
    from .config import find, load_toml

    path = find(path)
    data = load_toml(path)
    section = data.get("ecosystem")
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: needs an [ecosystem] section")
    unknown = sorted(set(section) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [ecosystem]: {', '.join(unknown)}; known: {', '.join(sorted(CONFIG_KEYS))}")
    expects = []
    for raw in data.get("expect", []):
        if raw.get("expect") != "different" or "preset" not in raw or raw.get("role") not in ("writer", "reader"):
            raise ConfigError(f"{path}: every [[expect]] needs preset, role (writer|reader) and expect = \"different\"")
        where = tuple((k, raw[k]) for k in sorted(EXPECT_FIELDS) if k in raw)
        expects.append(Expect(raw["preset"], raw["role"], where, raw.get("reason", "")))
    for name in checkouts:
        project(name)  # an unknown project name is a ConfigError
    get = section.get
    return EcosystemConfig(
        writers=_list(get("writers", [])), readers=_list(get("readers", [])),
        block_sizes=_list(get("block", [1, 16, 64])), layouts=_list(get("layout", ["linear", "shuffle"])),
        fp8=_list(get("fp8", ["e4m3fn", "e4m3fnuz"])), scale_fmts=_list(get("scale_fmt", ["ue8m0", "fp32"])),
        inputs=_list(get("inputs", ["normal"])), next_n=_list(get("next_n", [1, 2])), tokens=get("tokens", 128),
        head_dim=get("head_dim", 128), ctx=get("ctx", 2048), topk=get("topk", 512), heads=get("heads", 4),
        seed=get("seed", 0), reader_scale_fmt=get("reader_scale_fmt", "ue8m0"), expects=tuple(expects),
        checkouts=dict(checkouts))


# ---- one run ------------------------------------------------------------------------------------------


def _unsupported(preset: Preset, block: int, layout: str, fp8: str, scale_fmt: str) -> str | None:
    if fp8 not in preset.fp8:
        return f"{preset.key} supports {', '.join(preset.fp8)} only"
    if layout not in preset.layouts:
        return f"{preset.key} writes/reads the {', '.join(preset.layouts)} layout only"
    if preset.block_sizes is not None and block not in preset.block_sizes:
        return f"{preset.key} supports block_size {', '.join(map(str, preset.block_sizes))} only"
    if scale_fmt not in preset.scale_fmts:
        return f"{preset.key} supports {', '.join(preset.scale_fmts)} scales only"
    return None


def _record(preset: Preset, role: str, spec_fields: dict) -> dict:
    proj = project(preset.project)
    return {"project": proj.name, "version": proj.version, "preset": preset.key, "name": preset.name,
            "function": " then ".join(s.call for s in preset.steps), "role": role, **spec_fields,
            "status": None, "causes": [], "reason": None}


def _spec(block: int, layout: str, fp8: str, scale_fmt: str, tokens: int, head_dim: int) -> CacheSpec:
    return CacheSpec(num_blocks=max(1, -(-tokens // block)), block_size=block, head_dim=head_dim,
                     quant_block_size=128 if head_dim % 128 == 0 else head_dim, fp8=FP8Format(fp8),
                     scale_fmt=ScaleFormat(scale_fmt), layout=Layout(layout))


def run_writer(config: EcosystemConfig, preset: Preset, record: dict, device: torch.device, reference):
    """One writer run against `reference` (a Producer): identical / different with the causes' names."""
    from .compare import check_compare
    from .inputs import Distribution, generate
    from .writers import registry

    spec = _spec(record["block_size"], record["layout"], record["fp8"], record["scale_fmt"], config.tokens,
                 config.head_dim)
    data = generate(spec, seed=config.seed, distribution=Distribution(record["inputs"]))
    candidate = registry.resolve(PRESET_PREFIX + preset.key, fp8=spec.fp8,
                                 repo=config.checkouts.get(preset.project))
    checked = check_compare(spec, baseline=reference, candidate=candidate, inputs=data, device=device)
    record["status"] = "identical" if checked.result.diff.identical else "different"
    record["causes"] = [c.category.value for c in checked.diagnosis.causes]
    return checked


def run_reader(config: EcosystemConfig, preset: Preset, record: dict, device: torch.device, reference):
    """One reader run on the reference writer's bytes: pass, or fault with its causes: `recall` (it misses
    the exact reader's top-K), `mask-leak` (a position a row may not see is not -inf), `outside-write`."""
    from .parity import ParityConfig, generate, run_parity
    from .readers import registry as readers

    spec = _spec(record["block_size"], record["layout"], record["fp8"], record["scale_fmt"], config.ctx,
                 config.head_dim)
    parity = ParityConfig(ctx=(config.ctx,), topk=config.topk, next_n=record["next_n"])
    inputs = generate(spec, parity, heads=config.heads, seed=config.seed, shuffled=True)
    reader = readers.resolve(PRESET_PREFIX + preset.key, spec=spec, repo=config.checkouts.get(preset.project))
    result = run_parity(spec, parity, baseline=reference, writers=[], reader=reader, inputs=inputs, device=device)
    rows = result.reader_check or ()
    record["recall"] = round(min((m.recall for m in rows), default=1.0), 4)
    record["status"] = "fault" if result.reader_fault else "pass"
    found = result.obligations
    record["causes"] = [name for name, broken in (("recall", bool(result.reader_disagreements)),
                                                  ("mask-leak", bool(found.leaks)), ("outside-write", bool(found.outside)))
                        if broken]
    return result


# ---- the sweep ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EcosystemResult:
    """The matrix, decided (outcome.Checked): one record per run; it passes when every difference is a
    declared one, every declared one still shows, and nothing erred."""

    config: EcosystemConfig
    records: tuple[dict, ...]
    seconds: float
    kind: str = "ecosystem"

    @property
    def passed(self) -> bool:
        return not self.unexpected and not self.errors

    def counts(self) -> dict[str, int]:
        return {s: n for s in STATUSES if (n := sum(r["status"] == s for r in self.records))}

    def verdict_line(self) -> str:
        summary = ", ".join(f"{n} {s}" for s, n in self.counts().items())
        expected = sum(r.get("expect") == "different" for r in self.records)
        return (f"{'PASS' if self.passed else 'FAIL'}: {summary}; {expected} known upstream difference(s) as"
                f" expected, {len(self.unexpected)} unexpected")

    def top_cause(self) -> str | None:
        bad = (self.errors or self.unexpected)[:1]
        return None if not bad else _describe(bad[0])

    def detail(self) -> str:
        return "\n".join(_describe(r) for r in (*self.errors, *self.unexpected))

    def to_json(self) -> dict:
        return {"runs": [{k: v for k, v in r.items() if k != "seconds"} for r in self.records]}

    def run_json(self) -> dict:
        return {"seconds": round(self.seconds, 3), "run_seconds": [r.get("seconds") for r in self.records]}

    def views(self) -> tuple:
        """The matrix as a grid (a cell per run, by role, preset and spec), then every run as a row."""
        from collections import Counter

        from .views import Cell, Grid, Table

        keys = ("block_size", "layout", "fp8", "scale_fmt", "inputs", "next_n")
        cases = [({"role": r["role"], "preset": r["preset"], **{k: str(r[k]) for k in keys if k in r}},
                  Cell(*_tone(r), _describe(r))) for r in self.records]
        reasons = Counter(r.get("reason") or "" for r in self.records if r["status"] == "skipped")
        matrix = Grid.of("matrix", cases, tuple(f"{n} skipped: {reason}" for reason, n in reasons.items()))
        rows = tuple((r["role"], r["preset"], " ".join(f"{k}={r[k]}" for k in keys if k in r), r["status"],
                      r.get("reason") or ", ".join(r.get("causes") or ()) or "") for r in self.records)
        return (*((matrix,) if matrix else ()), Table("runs", ("role", "preset", "spec", "status", "found"), rows))

    @property
    def unexpected(self) -> list[dict]:
        """Runs that differ (or fault) without an expectation, and expected bugs that no longer show."""
        return [r for r in self.records if r.get("expect") == "unexpected"
                or (r["status"] in ("different", "fault") and r.get("expect") is None)]

    @property
    def errors(self) -> list[dict]:
        return [r for r in self.records if r["status"] == "error"]


def _tone(record: dict) -> tuple[str, str]:
    """(tone, symbol) of a run in a grid: a declared upstream difference that shows is `known`."""
    status, expect = record["status"], record.get("expect")
    if status in ("error", "skipped"):
        return status, "!" if status == "error" else "–"
    if expect == "different":
        return "known", "≠"
    if expect == "unexpected" or status in ("different", "fault"):
        return "failed", "✗"
    return "passed", "✓"


def _describe(record: dict) -> str:
    spec = " ".join(f"{k}={record[k]}" for k in ("block_size", "layout", "fp8", "scale_fmt", "inputs", "next_n")
                    if k in record)
    what = record["reason"] if record["status"] == "error" else (
        f"{record['status']} ({', '.join(record['causes']) or 'no cause'})" +
        ("; expected different" if record.get("expect") == "unexpected" else ""))
    return f"{record['role']} {record['preset']} {spec}: {what}"


def plan(config: EcosystemConfig) -> list[tuple[Preset, dict]]:
    """Every run of the sweep, in order: (preset, its record with the spec filled in and status unset).
    The shuffle layout exists only for block sizes that are multiples of 16 (docs/NUMERICS.md)."""
    runs = []
    valid = [(b, l) for b in config.block_sizes for l in config.layouts if not (l == "shuffle" and b % 16)]
    for key in config.writers:
        preset = find_preset(key, "writer")
        for (block, layout), fp8, scale_fmt, inputs in itertools.product(
                valid, config.fp8, config.scale_fmts, config.inputs):
            runs.append((preset, _record(preset, "writer", {"block_size": block, "layout": layout, "fp8": fp8,
                                                            "scale_fmt": scale_fmt, "inputs": inputs})))
    for key in config.readers:
        preset = find_preset(key, "reader")
        for (block, layout), fp8, next_n in itertools.product(valid, config.fp8, config.next_n):
            runs.append((preset, _record(preset, "reader", {"block_size": block, "layout": layout, "fp8": fp8,
                                                            "scale_fmt": config.reader_scale_fmt, "next_n": next_n})))
    return runs


def _skip_reason(config: EcosystemConfig, preset: Preset, record: dict) -> str | None:
    reason = _unsupported(preset, record["block_size"], record["layout"], record["fp8"], record["scale_fmt"])
    if reason is not None:
        return reason
    try:
        origin_for(preset, config.checkouts.get(preset.project))
    except UserError as exc:
        return str(exc)
    return None


def _fetch(config: EcosystemConfig, presets: list[Preset]) -> dict[str, str]:
    """Each preset's files read once here (downloads, hash checks), before any child runs; preset -> the
    reason it cannot be fetched."""
    failed = {}
    for preset in presets:
        try:
            origin = origin_for(preset, config.checkouts.get(preset.project))
            for step in preset.steps:
                origin.read(step.file)
        except UserError as exc:
            failed[preset.key] = str(exc)
    return failed


def run_ecosystem(config: EcosystemConfig, device: torch.device, progress: Progress | None = None) -> EcosystemResult:
    """Every run of the plan: skipped with its reason, or run and recorded (status, causes, recall)."""
    from .writers import registry

    progress = progress or (lambda label, done, total: None)
    start = time.perf_counter()
    reference = registry.resolve("reference")
    runs = plan(config)
    unique = list({p.key + p.role: p for p, _ in runs}.values())
    unfetched = _fetch(config, [p for p in unique if config.checkouts.get(p.project) or not p.needs_checkout])
    records = []
    for done, (preset, record) in enumerate(runs):
        records.append(record)
        progress(_describe({**record, "status": "running", "causes": []}).rsplit(":", 1)[0], done, len(runs))
        reason = _skip_reason(config, preset, record) or unfetched.get(preset.key)
        if reason is not None:
            record.update(status="skipped", reason=reason)
            continue
        began = time.perf_counter()
        try:
            (run_writer if record["role"] == "writer" else run_reader)(config, preset, record, device, reference)
        except UserError as exc:
            record.update(status="error", reason=str(exc).splitlines()[0] if str(exc) else first_line(exc))
        expect = next((e for e in config.expects if e.matches(record)), None)
        if expect is not None:
            record["expect"] = "different" if record["status"] in ("different", "fault") else "unexpected"
            record["expect_reason"] = expect.reason
        record["seconds"] = round(time.perf_counter() - began, 3)
    progress("done", len(runs), len(runs))
    return EcosystemResult(config, tuple(records), time.perf_counter() - start)
