"""The mutation benchmark's operators and its real path, on a few mutants of fp8check's own Triton writer:
each is killed by `compare` with its defaults and named by the cause its bug is (bench/mutation.py;
`make mutation` runs every mutant of three writers)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_mutation", BENCH / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_mutation", module)
    spec.loader.exec_module(module)
    return module


mutation = _bench()
TRITON = mutation.TARGETS[0]


def find(before: str, after: str):
    """The one mutant of fp8check's writer that turns the code `before` into `after`."""
    found = [m for m in mutation.mutants(TRITON, TRITON.sources()) if before in m.before and after in m.after]
    assert len(found) == 1, [m.after for m in found]
    return found[0]


def test_the_operators_make_the_mutants_they_name():
    every = mutation.mutants(TRITON, TRITON.sources())
    assert {m.operator for m in every} == {o.name for o in mutation.OPERATORS}
    assert len({m.id for m in every}) == len(every)
    # only code of the kernel and its launch is mutated, never comments or the signature
    assert all("#" not in m.after and not m.before.startswith("def ") for m in every)
    abs_removed = find("tl.reduce(tl.abs(x)", "tl.reduce(x,")
    assert abs_removed.operator == "abs" and abs_removed.family == "amax"


@pytest.mark.parametrize("before, after, verdict, top", [
    ("tl.reduce(tl.abs(x)", "tl.reduce(x,", "killed", "amax"),
    ("values = values.view(fp8_dtype)", "values = values", "killed", "integer-cast"),
    # on CUDA, 16 tokens per program divide compare's 192: no program holds token 192 and the mutant is
    # equivalent there; the interpreter's 256 do, and it reads the guard rows past the inputs
    pytest.param("in_range = token < num_tokens", "in_range = token <= num_tokens", "killed", "stray-write",
                 marks=pytest.mark.cpu),
    ("y.to(value_ptr.dtype.element_ty)", "y.to(tl.uint8)", "crashed", None),
])
def test_mutants_are_killed_and_named_through_compare(tmp_path, before, after, verdict, top):
    mutant = find(before, after)
    judged = mutation.judge(TRITON, TRITON.sources(), mutant, tmp_path, None, (None, None))
    assert (judged.compare, judged.top) == (verdict, top)
    assert judged.in_family == (top is not None)
    if verdict == "crashed":  # the seed's bug named in one line, without the interpreter's array dump
        assert "the seed's integer-cast bug" in judged.hint and "[" not in judged.hint


def test_the_gate_copy_replaces_only_fp8checks_writer():
    text = (mutation.ROOT / "configs" / "ci.toml").read_text()
    copy = mutation.tomllib.loads(mutation.with_candidate(text, "file:m.py:w", None))
    original = mutation.tomllib.loads(text)
    assert all(case["candidate"] == "file:m.py:w" for case in copy["case"])
    assert len(copy["case"]) == sum(case.get("candidate") == "triton" for case in original["case"])
    assert copy["defaults"] == original["defaults"]
