"""pytest plugin (entry point `pytest11`): a `fp8check` fixture, and gate configs as parameters (docs/api.md).

Loading it changes nothing: it imports neither torch nor Triton and sets no environment variable; Triton
kernels run on CPU tensors in fp8check's exact interpreter only while fp8check runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from . import api, testing


@dataclass(frozen=True)
class Fp8check:
    """What the fixture gives: the API's entry points, and a gate case run as `fp8check gate` runs it."""

    compare_writers = staticmethod(api.compare_writers)
    assert_same_cache_bytes = staticmethod(testing.assert_same_cache_bytes)

    @staticmethod
    def check_case(case, *, strict: bool = False):
        """One gate case (fp8check_gate_cases) run as `fp8check gate` runs it, its Outcome returned: a skip is a
        pytest skip with the reason (a failure with `strict`); a failure or an error fails the test."""
        __tracebackhide__ = True
        from .run.gate import fetch, run_case
        from .core.outcome import Status

        outcome = run_case(case, strict=strict, unfetched=fetch((case,)))
        if outcome.status is Status.SKIPPED:
            pytest.skip(outcome.error)
        if outcome.status is Status.FAILED:
            pytest.fail(f"{outcome.verdict_line()}\n{outcome.top_cause() or ''}\n{outcome.detail()}".strip(),
                        pytrace=False)
        if outcome.status is Status.ERROR:
            pytest.fail(f"ERROR (exit {int(outcome.exit_code)}): {outcome.error}", pytrace=False)
        return outcome


@pytest.fixture
def fp8check() -> Fp8check:
    return Fp8check()


class CaseParams(dict):
    """The keywords of one compare case of a gate config; str() is its case id (for `ids=str`)."""

    def __init__(self, case_id: str, values: dict):
        super().__init__(values)
        self.id = case_id

    def __str__(self) -> str:
        return self.id


def fp8check_cases(config: str | Path, *, candidate: bool = False) -> list:
    """The compare cases of a gate config (a path, or a built-in name) as pytest params with their ids, each the
    keywords of compare_writers / assert_same_cache_bytes. Without `candidate` the test's writer stands for each
    case's candidate: cases that then differ only in it are given once, `expect = "different"` ones (about their
    own candidate) left out. With it, an `expect = "different"` case is a strict xfail."""
    from .run import options
    from .run.gate_config import GOLDEN, load
    from .run.prepare import run_id

    params, seen = [], set()
    for case in load(config).cases:
        if case.kind != "compare" or (not candidate and case.values["expect"] == "different"):
            continue
        keys = [*options.BUDGET, "baseline", *(("candidate",) if candidate else ())]
        if not case.values["baseline"].startswith(GOLDEN):  # a recording brings its own spec and inputs
            keys += options.SPEC
        case_id = case.id if candidate else run_id("compare", case.values, candidate=False)
        if case_id in seen:
            continue
        seen.add(case_id)
        values = CaseParams(case_id, {k: case.values[k] for k in keys})
        marks = ([pytest.mark.xfail(strict=True, raises=AssertionError,
                                    reason=f"expect = \"different\" ({case.source})")]
                 if case.values["expect"] == "different" else [])
        params.append(pytest.param(values, id=case_id, marks=marks))
    return params


def fp8check_gate_cases(config: str | Path, *, candidate: str | None = None, checkouts=(), device: str | None = None,
                        patterns=()) -> list:
    """Every case of a gate config (a path, or a built-in name) as a pytest param with the case's id, for
    `fp8check.check_case`: the cases `fp8check gate CONFIG` runs with its --candidate, --checkout, --device and
    -k. pytest passes a session whose every test skipped: `check_case(case, strict=True)` fails a skip."""
    from .run.gate_config import load, select

    cases = load(config, device=device, checkouts=tuple(checkouts), candidate=candidate).cases
    return [pytest.param(case, id=case.id) for case in select(cases, tuple(patterns))]
