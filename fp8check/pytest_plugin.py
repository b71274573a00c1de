"""pytest plugin (entry point `pytest11`): a `fp8check` fixture and `fp8check_cases(CONFIG)` for parametrize.

    from fp8check.pytest_plugin import fp8check_cases

    @pytest.mark.parametrize("case", fp8check_cases("gate.toml"), ids=str)
    def test_writer(fp8check, case):
        fp8check.assert_same_cache_bytes(my_writer, **case)

Loading the plugin changes nothing: Triton kernels run on CPU tensors in fp8check's exact interpreter only
while fp8check runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Fp8check:
    """What the fixture gives: the API's two entry points."""

    @staticmethod
    def compare_writers(candidate, baseline="auto", **spec_and_inputs):
        from .api import compare_writers

        return compare_writers(candidate, baseline, **spec_and_inputs)

    @staticmethod
    def assert_same_cache_bytes(candidate, baseline="auto", **spec_and_inputs):
        __tracebackhide__ = True
        from .testing import assert_same_cache_bytes

        return assert_same_cache_bytes(candidate, baseline, **spec_and_inputs)


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
    """The compare cases of a gate config (a path, or a built-in name) as pytest params with their ids.

    Each param is a dict of spec, input and budget keywords for compare_writers / assert_same_cache_bytes;
    `baseline` is included, `candidate` only with candidate=True (the test usually supplies its own writer).
    A case with expect = "different" is marked xfail(strict=True): it must keep failing.
    """
    from . import options
    from .gate_config import load

    params = []
    for case in load(config).cases:
        if case.kind != "compare":
            continue
        keys = [*options.BUDGET, "baseline", *(("candidate",) if candidate else ())]
        if not case.values["baseline"].startswith("golden:"):  # a recording brings its own spec and inputs
            keys += options.SPEC
        _, pair, rest = case.id.split(":", 2)  # compare:CANDIDATE~BASELINE:...: the test brings its candidate
        case_id = case.id if candidate else f"vs-{pair.split('~', 1)[1]}:{rest}"
        values = CaseParams(case_id, {k: case.values[k] for k in keys})
        marks = [pytest.mark.xfail(strict=True, raises=AssertionError)] if case.values["expect"] == "different" else []
        params.append(pytest.param(values, id=case_id, marks=marks))
    return params
