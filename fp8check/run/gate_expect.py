"""A gate case's kinds with the keys and expectations each takes, and declared differences: a gate config's
`[[expect]]` rows, each matched by field against every case (docs/gate.md, "Declared differences").
The first matching row gives a case its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from . import options
from ..core.errors import ConfigError

KINDS = ("compare", "table", "parity")
EXPECT = ("same", "different", "scale-ulp", "rounding")
# the expectations each kind takes; a parity case's "different": a reader fault
EXPECTS = {"compare": EXPECT, "table": (), "parity": ("same", "different")}
CASE_KEYS = {
    "compare": (*options.COMPARE_KEYS, "expect"),
    "table": options.TABLE_KEYS,
    "parity": (*options.PARITY_CASE_KEYS, *options.ORIGINS, "expect"),
}
ROW_KEYS = ("kind", "expect", "reason")  # a row's own keys; every other key is a case key to match


@dataclass(frozen=True)
class ExpectRow:
    where: str  # `FILE [[expect]] #2`
    kind: str | None
    expect: str
    reason: str
    fields: tuple[tuple[str, tuple], ...]  # (case key, the values it may have)

    def matches(self, kind: str, values: dict[str, Any], ignore: tuple[str, ...] = ()) -> bool:
        return self.kind in (None, kind) and all(values.get(key, options.option(key, kind).default) in allowed
                                                 for key, allowed in self.fields if key not in ignore)


def parse(rows: Any, where: str) -> tuple[ExpectRow, ...]:
    """The `[[expect]]` array of a config, validated."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{where}: `expect` must be an array of tables ([[expect]])")
    return tuple(_row(raw, f"{where} [[expect]] #{i + 1}") for i, raw in enumerate(rows))


def _row(raw: dict, where: str) -> ExpectRow:
    kind = raw.get("kind")
    if kind is not None and kind not in KINDS:
        raise ConfigError(f"{where}: kind = {kind!r}: expected one of {', '.join(KINDS)}")
    kinds = (kind,) if kind else KINDS
    known = tuple(dict.fromkeys(k for name in kinds for k in CASE_KEYS[name] if k != "expect"))
    unknown = [k for k in raw if k not in ROW_KEYS and k not in known]
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}; a row matches cases by"
                          f" {', '.join(known)} (and has kind, expect, reason)")
    allowed = tuple(dict.fromkeys(e for name in kinds for e in EXPECTS[name] if e != "same"))
    expect = raw.get("expect")
    if expect not in allowed:
        raise ConfigError(f"{where}: expect = {expect!r}: expected one of {', '.join(allowed)}")
    reason = raw.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError(f"{where}: needs a reason (a string saying why the difference is expected)")
    fields = tuple((key, _allowed(key, value, kind or "", where)) for key, value in raw.items() if key not in ROW_KEYS)
    if not fields:
        raise ConfigError(f"{where}: names no case key to match: it would match every case")
    return ExpectRow(where, kind, expect, " ".join(reason.split()), fields)


def _allowed(key: str, value: Any, kind: str, where: str) -> tuple:
    """The values a field allows, each validated as the case key's option would validate it."""
    option = options.option(key, kind)
    if option.many or not isinstance(value, list):
        return (option.validate(value, where),)
    if not value:
        raise ConfigError(f"{where}: {key} is an empty list")
    return tuple(option.validate(item, where) for item in value)


def apply(rows: tuple[ExpectRow, ...], cases: list) -> list:
    """Each case a row matches, with the row's `expect` and reason; a case that states its own expectation
    keeps it. A row that matches no case is a ConfigError: it would hide a typo."""
    used, out = set(), []
    for case in cases:
        # `gate --device` may put any case on any device: a row naming another device is still in use
        used.update(r.where for r in rows if r.matches(case.kind, case.values, ignore=("device",)))
        row = next((r for r in rows if r.matches(case.kind, case.values)), None)
        if row is not None and case.values.get("expect", "same") == "same":
            case = replace(case, values={**case.values, "expect": row.expect}, reason=row.reason)
        out.append(case)
    unused = [r.where for r in rows if r.where not in used]
    if unused:
        raise ConfigError(f"{unused[0]}: matches no case of the config (a misspelled value?)")
    return out
