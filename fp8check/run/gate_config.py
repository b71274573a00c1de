"""A gate config (docs/gate.md): [defaults], a [matrix] and [[case]] tables, expanded into cases with
stable ids, and [[expect]] rows of declared differences (gate_expect.py).

Every key of every table, [defaults] included, is validated by the option table the CLI is built from
(options.py). [defaults] gives values to every case that takes the key (a golden baseline's case excepted: the
recording brings its spec and inputs). A product over MAX_CASES cases is refused before it is built.
"""

from __future__ import annotations

import fnmatch
import itertools
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import gate_expect, options
from .gate_expect import CASE_KEYS, EXPECT, EXPECTS, KINDS
from .prepare import GOLDEN_INPUT_KEYS, GOLDEN_SPEC_KEYS, named_code, run_id, shown, spec_of
from ..code.names import GOLDEN_PREFIX as GOLDEN, SOURCE_KINDS, Kind, is_git, parse
from ..code.projects.compose import check_checkouts, named, project_of
from ..core.config import find, load_toml
from ..core.errors import ConfigError, SpecError, UsageError, UserError

MAX_CASES = 10_000  # 10^6 cases took 72 s and 1 GB for --list alone
OWN_WRITER = "triton"  # fp8check's writer: what `candidate` replaces
# Product order: writers outermost, then the spec and inputs, so cases of one writer pair stay together.
# parity: its lists (ctx, writers, expect_fail) are values, never swept
SWEEPABLE = {"compare": ("pairs", "candidate", "baseline", *options.SPEC, *options.BUDGET),
             "table": ("baseline", "buggy", "fixed", *options.SPEC),
             "parity": ("baseline", "reader", "block", "head_dim", "qbs", "layout", "fp8", "scale_fmt", "next_n",
                        "inputs", "seed", "topk", "heads")}
ALL_KEYS = tuple(dict.fromkeys(k for keys in CASE_KEYS.values() for k in keys))


@dataclass(frozen=True)
class Case:
    """One case of a gate: its stable id, its kind, its validated values (config keys) and where it came from."""

    id: str
    kind: str
    values: dict[str, Any] = field(hash=False)
    source: str  # `FILE [[case]] #3`, for error messages
    reason: str | None = None  # why it is expected to differ (the [[expect]] row that says so)

    @property
    def axes(self) -> tuple[tuple[str, str], ...]:
        """(key, value as text) of its kind and every value: where it sits in a matrix of cases."""
        return (("kind", self.kind), *((key, shown(v)) for key, v in self.values.items()))


@dataclass(frozen=True)
class GateConfig:
    path: Path
    cases: tuple[Case, ...]


def load(text: str | Path, *, device: str | None = None, checkouts: tuple[str, ...] = (),
         candidate: str | None = None) -> GateConfig:
    """Read, validate and expand a gate config given by path or built-in name; `device` (gate --device)
    replaces the device every case names, `checkouts` (PROJECT=PATH each) are given to every case, and
    `candidate` stands where fp8check's own writer does."""
    path = find(text)
    data = load_toml(path)
    unknown = sorted(set(data) - {"defaults", "matrix", "case", "expect"})
    if "ecosystem" in unknown:
        raise ConfigError(f"{path}: an [ecosystem] section is the old matrix format: write its writers and readers as"
                          " [[case]] tables and its expectations as [[expect]] rows (docs/gate.md)")
    command = next((name for name in ("table", "parity") if name in unknown), None)
    if command:  # a seed config given to the gate
        raise ConfigError(f"{path}: a [{command}] section is a config of `fp8check {command} --config`, not a gate")
    if unknown:
        raise ConfigError(f"{path}: unknown table(s) {', '.join(unknown)}; known: defaults, matrix, case, expect")
    rows = gate_expect.parse(data.get("expect", []), str(path))
    defaults = _table(data.get("defaults", {}), f"{path} [defaults]")
    _check_defaults(defaults, f"{path} [defaults]")
    entries: list[tuple[str, dict]] = []
    if "matrix" in data:
        entries.append((f"{path} [matrix]", {"kind": "compare", **_table(data["matrix"], f"{path} [matrix]")}))
    cases = data.get("case", [])
    if not isinstance(cases, list):
        raise ConfigError(f"{path}: `case` must be an array of tables ([[case]])")
    entries += [(f"{path} [[case]] #{i + 1}", _table(entry, f"{path} [[case]] #{i + 1}")) for i, entry in enumerate(cases)]
    if not entries:
        raise ConfigError(f"{path}: no cases: add a [matrix] or [[case]] table")
    given = {**({"device": device} if device is not None else {}),
             **({"checkout": _checkouts(checkouts)} if checkouts else {})}
    defaults.update(given)
    entries = [(where, {**entry, **given}) for where, entry in entries]
    if candidate is not None:
        entries = [(where, _with_candidate(entry, defaults, candidate)) for where, entry in entries]
    counted = 0
    for where, entry in entries:  # the cap, before any product is built
        _, _, merged, swept = _merged(entry, defaults, where)
        counted += math.prod(len(merged[k]) for k in swept)
        if counted > MAX_CASES:
            raise ConfigError(f"{where}: the config makes more than {MAX_CASES:,} cases ({counted:,} so far);"
                              " sweep fewer values or split it into several configs")
    expanded = [case for where, entry in entries for case in _expand(entry, defaults, where, path.parent)]
    expanded = gate_expect.apply(rows, expanded)
    if checkouts:
        expanded = _with_checkouts(expanded, checkouts, path)
    seen: dict[str, str] = {}
    for case in expanded:
        if case.id in seen:
            raise ConfigError(f"{case.source}: case {case.id} is also made by {seen[case.id]}")
        seen[case.id] = case.source
    return GateConfig(path, tuple(expanded))


def _checkouts(items: tuple[str, ...]) -> tuple[str, ...]:
    """`--checkout PROJECT=PATH` values, each clone a folder (its project is checked against the cases')."""
    found = options.checkouts(items)
    for name, clone in found.items():
        if not Path(clone).is_dir():
            raise ConfigError(f"--checkout {name}={clone}: no such folder")
    return tuple(f"{name}={Path(clone).resolve()}" for name, clone in found.items())


def _with_checkouts(cases: list[Case], checkouts: tuple[str, ...], path: Path) -> list[Case]:
    """Each case with the checkouts of its own presets' projects only; a checkout no case uses is an error."""
    given = options.checkouts(checkouts)
    check_checkouts(given, [pair for case in cases for pair in named_code(case.values)], str(path))
    out = []
    for case in cases:
        used = {project_of(name, role) for name, role in named_code(case.values)}
        mine = tuple(f"{name}={clone}" for name, clone in given.items() if name in used)
        out.append(replace(case, values={**case.values, "checkout": mine}))
    return out


def _with_candidate(entry: dict, defaults: dict, name: str) -> dict:
    """The entry with `name` where fp8check's writer stands, and its preset's padding convention."""
    kind = entry.get("kind", "compare")
    preset = named(name, "writer")
    out = dict(entry)
    def swap(writer):
        return name if writer == OWN_WRITER else writer

    if kind == "compare":
        if "pairs" in entry and isinstance(entry["pairs"], list):
            out["pairs"] = [{**p, "candidate": swap(p["candidate"])} if isinstance(p, dict) and "candidate" in p else p
                            for p in entry["pairs"]]
        given = entry.get("candidate", defaults.get("candidate", OWN_WRITER))
        out["candidate"] = [swap(c) for c in given] if isinstance(given, list) else swap(given)
        if given == OWN_WRITER and preset is not None and preset.pad_slot >= 0 and "pad_slot" not in entry:
            out["pad_slot"] = preset.pad_slot
    elif kind == "table":
        out["fixed"] = swap(entry.get("fixed", defaults.get("fixed", OWN_WRITER)))
    elif kind == "parity":
        writers = entry.get("writers", defaults.get("writers", options.PARITY["writers"].default))
        if isinstance(writers, (list, tuple)) and OWN_WRITER in writers:
            out["writers"] = [swap(w) for w in writers]
    return out


def _table(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a table")
    return dict(value)


def _check_defaults(defaults: dict, where: str) -> None:
    """Every key of [defaults] is a case key, and its one value (lists are swept in [matrix] and [[case]]
    only; list options such as parity's ctx excepted) passes its option, named with its key."""
    unknown = [k for k in defaults if k not in ALL_KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(ALL_KEYS)}")
    for key, value in defaults.items():
        if key == "expect":
            _expect({"expect": value}, where)
        else:  # each case checks its own kind's rules again (parity's slots are a block table's order)
            options.option(key).validate(value, where)


def _merged(entry: dict, defaults: dict, where: str) -> tuple[str, dict, dict, list[str]]:
    """(kind, the entry's own keys, the entry over the defaults it takes, the keys it sweeps), with unknown
    keys refused."""
    kind = entry.get("kind", "compare")
    if kind not in KINDS:
        raise ConfigError(f"{where}: kind = {kind!r}: expected one of {', '.join(KINDS)}")
    body = {k: v for k, v in entry.items() if k != "kind"}
    known = (*CASE_KEYS[kind], *(("pairs",) if kind == "compare" else ()))
    unknown = [k for k in body if k not in known]
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} for a {kind} case; known: {', '.join(known)}")
    merged = {**{k: v for k, v in defaults.items() if k in CASE_KEYS[kind]}, **body}
    if "pairs" in merged and not isinstance(merged["pairs"], list):
        raise ConfigError(f"{where}: pairs must be an array of tables of baseline and candidate,"
                          f" got {type(merged['pairs']).__name__} {merged['pairs']!r}")
    return kind, body, merged, [k for k in SWEEPABLE[kind] if isinstance(merged.get(k), list)]


def _expand(entry: dict, defaults: dict, where: str, base: Path) -> list[Case]:
    kind, body, merged, swept = _merged(entry, defaults, where)
    for k in swept:
        if not merged[k]:
            raise ConfigError(f"{where}: {k} is an empty list")
        bad = [p for p in merged[k] if not isinstance(p, dict) or set(p) - {"baseline", "candidate"}]
        if k == "pairs" and bad:
            raise ConfigError(f"{where}: pairs must hold tables of baseline and candidate, got {bad[0]!r}")
    cases = []
    for combo in itertools.product(*(merged[k] for k in swept)):
        values = {k: v for k, v in merged.items() if k not in swept}
        for k, v in zip(swept, combo):
            values.update(v if k == "pairs" else {k: v})
        cases.append(_case(kind, values, where, base, own=set(body)))
    return cases


def _expect(values: dict, where: str, allowed: tuple[str, ...] = EXPECT) -> str:
    expect = values.get("expect", "same")
    if expect not in allowed:
        raise ConfigError(f"{where}: expect = {expect!r}: expected one of {', '.join(allowed)}")
    return expect


def _case(kind: str, values: dict, where: str, base: Path, own: set) -> Case:
    """A case, validated by its command's options. A compare against `golden:FILE` takes the spec and the
    inputs from the file: spec keys the case itself gives are checked against it when it runs."""
    golden = kind == "compare" and parse(values.get("baseline", "")).kind is Kind.GOLDEN
    replayed = [k for k in GOLDEN_INPUT_KEYS if k in own] if golden else []
    if replayed:
        raise ConfigError(f"{where}: {', '.join(replayed)} cannot be combined with baseline ="
                          f" {values['baseline']!r}: the recorded inputs are replayed")
    if kind == "parity" and values.get("ctx") == []:
        raise ConfigError(f"{where}: ctx is an empty list")
    if kind == "parity" and values.get("writers") == [] and values.get("reader", "reference") == "reference":
        raise ConfigError(f"{where}: writers is an empty list (with no writer, name the reader to check)")
    given = {k: v for k, v in values.items() if k != "expect"}
    if kind == "parity":
        checked = options.validate(given, options.PARITY_KEYS, where, "parity")
    else:
        checked = {**options.defaults(options.TABLE_KEYS if kind == "table" else options.COMPARE_KEYS),
                   **options.validate(given, CASE_KEYS[kind], where)}
    file = parse(checked["baseline"]).path if golden else None
    if golden and not file:
        raise ConfigError(f"{where}: baseline = 'golden:' needs a file")
    if kind == "compare" or "expect" in values:
        checked["expect"] = _expect(values, where, EXPECTS[kind])
    if golden:
        checked["golden_check"] = tuple(k for k in GOLDEN_SPEC_KEYS if k in own)
        checked["baseline"] = GOLDEN + str(file if is_git(file) or Path(file).is_absolute() else base / file)
    elif kind != "parity":  # its CacheSpec built now, so an impossible cache fails before anything runs
        if checked.get("input") is None:  # else the replayed file decides num_blocks; checked when it runs
            try:
                spec_of(checked)
            except SpecError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        for key in ("candidate", "buggy", "fixed", "baseline"):
            if parse(checked.get(key, "")).kind is Kind.GOLDEN:
                raise ConfigError(f"{where}: {key} = {checked[key]!r}: golden files serve only as a compare's"
                                  " baseline")
    return Case(run_id(kind, checked), kind, _relative_to(checked, base), where)


def _relative_to(values: dict, base: Path) -> dict:
    """Relative paths of file: producers and replayed inputs taken from the config's folder."""
    out = dict(values)

    def resolve(text: str) -> str:
        try:
            name = parse(text)
        except UserError:  # refused where the name is used, with the option named
            return text
        if name.kind in (Kind.FILE, Kind.VLLM_FILE, *SOURCE_KINDS) and name.local_path is not None \
                and not name.local_path.is_absolute():
            return name.with_path(str(base / name.path))
        return text

    out.update({key: resolve(out[key]) for key in ("baseline", "candidate", "buggy", "fixed", "reader")
                if key in out})  # (a golden baseline was resolved by _case)
    if "writers" in out:
        out["writers"] = type(out["writers"])(resolve(w) for w in out["writers"])
    if out.get("input") is not None and not is_git(str(out["input"])) and not Path(out["input"]).is_absolute():
        out["input"] = base / out["input"]
    return out


def select(cases: tuple[Case, ...], patterns: tuple[str, ...]) -> tuple[Case, ...]:
    """Cases whose id matches one of the expressions; all when none is given. An expression has pytest's
    -k grammar: words joined by `and`, `or`, `not` and parentheses; a word matches an id that contains
    it, or that it matches as a glob (`*`, `?`)."""
    if not patterns:
        return cases
    matchers = [_expression(p) for p in patterns]
    return tuple(c for c in cases if any(m(c.id) for m in matchers))


def _expression(text: str):
    """`text` (pytest's -k grammar) -> a predicate over case ids; a UsageError names what is wrong."""
    tokens = re.findall(r"\(|\)|[^\s()]+", text)
    grammar = " (the grammar is pytest's: words, and, or, not, parentheses)"
    position = 0

    def peek():
        return tokens[position] if position < len(tokens) else None

    def parse(level: int):  # 0: terms joined by `or`, 1: by `and`, 2: `not`, a parenthesis or a word
        nonlocal position
        token = peek()
        if level < 2:
            terms = [parse(level + 1)]
            while peek() == ("or", "and")[level]:
                position += 1
                terms.append(parse(level + 1))
            join = (any, all)[level]
            return lambda case_id: join(t(case_id) for t in terms)
        position += 1
        if token == "not":
            inner = parse(2)
            return lambda case_id: not inner(case_id)
        if token == "(":
            inner = parse(0)
            if peek() != ")":
                raise UsageError(f"-k {text!r}: expected ')' at word {position + 1}")
            position += 1
            return inner
        if token is None or token in (")", "and", "or"):
            raise UsageError(f"-k {text!r}: expected a word, 'not' or '(' at word {position}{grammar}")
        return lambda case_id: token in case_id or fnmatch.fnmatchcase(case_id, token)

    matcher = parse(0)
    if peek() is not None:
        raise UsageError(f"-k {text!r}: unexpected {peek()!r} at word {position + 1}{grammar}")
    return matcher


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` -> (K, N) with 1 <= K <= N."""
    k, sep, n = text.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise UsageError(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return int(k), int(n)


def shard(cases: tuple[Case, ...], k: int, n: int) -> tuple[Case, ...]:
    """Shard K of N: every N-th case from the K-th, in config order; the N shards hold every case once."""
    return cases[k - 1 :: n]
