"""A large interpreted grid runs on every core with the bytes of a sequential run (interpreter_speed.py)."""

from __future__ import annotations

import os

import pytest
import torch

from fp8check import inputs
from fp8check.spec import CacheSpec, FP8Format
from fp8check.writers import interpreter_speed, registry
from fp8check.writers import triton as triton_writer
from fp8check.writers.interpreter import check

pytestmark = pytest.mark.skipif(not check(FP8Format.E4M3FN)[0], reason="no exact interpreter here")


@pytest.fixture
def forks(monkeypatch):
    """Count the worker processes started; let each test choose the worker count."""
    count = {"forks": 0}
    fork = os.fork

    def counted():
        count["forks"] += 1
        return fork()

    monkeypatch.setattr(os, "fork", counted)
    return count


def test_one_program_per_token_grid_gives_the_sequential_bytes_on_two_workers(forks, monkeypatch):
    monkeypatch.setitem(triton_writer.TOKENS_PER_PROGRAM, "cpu", 1)  # vLLM's grid: one program per token
    spec = CacheSpec(num_blocks=2, block_size=32, head_dim=64, quant_block_size=64)
    data = inputs.generate(spec, seed=4, slots=inputs.SlotPattern.PADDED)  # 80 programs, 16 of them padding
    producer = registry.resolve("triton")
    monkeypatch.setattr(interpreter_speed, "MAX_WORKERS", 1)
    sequential = registry.run(producer, spec, data, torch.device("cpu"))
    assert forks["forks"] == 0
    monkeypatch.setattr(interpreter_speed, "MAX_WORKERS", 2)
    forked = registry.run(producer, spec, data, torch.device("cpu"))
    assert forks["forks"] == 1
    assert torch.equal(forked.buffer, sequential.buffer)
    reference = registry.run(registry.resolve("reference-vllm"), spec, data, torch.device("cpu"))
    assert torch.equal(forked.buffer, reference.buffer)  # and they are the right bytes


def test_a_failing_program_in_a_worker_is_an_error_in_the_caller(forks, monkeypatch):
    import triton.language as tl
    from triton.runtime.errors import InterpreterError
    from triton.runtime.interpreter import InterpretedFunction

    def kernel(out_ptr, LIMIT: tl.constexpr):
        pid = tl.program_id(0)
        tl.assume(pid < LIMIT)  # the interpreter asserts it (device_assert needs debug mode)
        tl.store(out_ptr + pid, pid)

    monkeypatch.setattr(interpreter_speed, "MAX_WORKERS", 2)
    out = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(InterpreterError):
        InterpretedFunction(kernel)[(64,)](out, LIMIT=40)  # programs 40-63 belong to the worker
    assert forks["forks"] == 1
    InterpretedFunction(kernel)[(64,)](out, LIMIT=64)
    assert out.tolist() == list(range(64))  # program ids are the whole grid's in both processes


def test_kernels_with_atomics_stay_sequential(forks, monkeypatch):
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    def kernel(counter_ptr, out_ptr):
        pid = tl.program_id(0)
        tl.store(out_ptr + pid, tl.num_programs(0))
        tl.atomic_add(counter_ptr, 1)

    monkeypatch.setattr(interpreter_speed, "MAX_WORKERS", 2)
    counter, out = torch.zeros(1, dtype=torch.int32), torch.zeros(64, dtype=torch.int32)
    InterpretedFunction(kernel)[(64,)](counter, out)
    assert forks["forks"] == 0
    assert counter.item() == 64 and out.tolist() == [64] * 64


def _language_state():
    import triton.language as tl

    return {name: getattr(tl, name) for name in dir(tl)}, {name: getattr(tl.tensor, name) for name in dir(tl.tensor)}


@pytest.mark.parametrize("once", [True, False], ids=["patched once per grid", "Triton's patch per call"])
def test_patching_the_language_once_per_grid_keeps_the_bytes_and_restores_it(monkeypatch, once):
    """A one-program-per-token writer calls a device function (tl.max) in every program. With the language patched once per grid its bytes are those of Triton's own patching at
    every call (the original `_patch_lang`, put back for the other run), the reference's bytes, and after
    the grid every attribute of triton.language is the one it had before."""
    from triton.runtime import interpreter

    monkeypatch.setattr(interpreter_speed, "MAX_WORKERS", 1)
    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=128)
    data = inputs.generate(spec, seed=4, slots=inputs.SlotPattern.SHUFFLED)
    producer = registry.resolve("vllm-file:tests/kernels/rocm_indexer_ops.py", isolation=None)
    registry.run(producer, spec, data, torch.device("cpu"))  # loads and checks the kernel once
    replacement = interpreter._patch_lang
    original = replacement.triton_original
    patches = []

    def counted(fn):
        patches.append(fn.__name__)
        return original(fn)

    if once:
        monkeypatch.setattr(replacement, "triton_original", counted)
    else:
        monkeypatch.setattr(interpreter, "_patch_lang", counted)
    before = _language_state()
    got = registry.run(producer, spec, data, torch.device("cpu"))
    assert _language_state() == before
    expected = registry.run(registry.resolve("reference-vllm"), spec, data, torch.device("cpu"))
    assert torch.equal(got.buffer, expected.buffer)
    programs = spec.num_slots  # one per token
    if once:  # the grid's own patch, and one for the modules tl.max sees (tl.core), whatever the grid's size
        assert patches == ["_quant_k_into_paged_cache", "max"]
    else:  # the grid's, then one per device call: its tl.max in every program
        assert len(patches) == 1 + programs
