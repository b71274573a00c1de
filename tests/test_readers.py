"""The reader registry and the aiter reader adapter, contract-tested against a stand-in (no real aiter here)."""

from __future__ import annotations

import pytest
import torch
from standins import aiter_reader_standin, install

from fp8check.run import parity, parity_inputs
from fp8check.core.errors import ProducerError
from fp8check.producers.adapters import aiter_reader
from fp8check.core.producer import Reader
from fp8check.producers import registry
from fp8check.core.spec import CacheSpec, Layout
from fp8check.producers import registry as producers
from fp8check.producers.adapters.platform import Backend, Platform

CPU = torch.device("cpu")
MI355 = Platform(Backend.ROCM, True, "stand-in MI355X", "gfx950:sramecc+:xnack-", "cpu")  # stand-in runs on the CPU
MI300 = Platform(Backend.ROCM, True, "stand-in MI300X", "gfx942:sramecc+:xnack-", "cpu")
H200 = Platform(Backend.CUDA, True, "stand-in H200", "sm_90", "cpu")

pytestmark = pytest.mark.usefixtures("no_real_libraries")  # tests/conftest.py


def sweep(spec: CacheSpec, reader, ctx=(16, 100, 300)):
    config = parity_inputs.ParityConfig(ctx=ctx, topk=32)
    spec = spec.replace(num_blocks=-(-config.max_ctx // spec.block_size))
    inputs = parity_inputs.generate(spec, config, heads=4, seed=2, shuffled=True)
    return parity.run_parity(spec, config, baseline=producers.resolve("reference"),
                             writers=[producers.resolve("reference")], reader=reader, inputs=inputs, device=CPU)


def test_registry_lists_reference_and_aiter():
    assert registry.names(registry.Role.READER) == ["reference", "aiter"]
    spec = CacheSpec()
    reader = registry.resolve_reader("reference", spec=spec)
    assert reader.exact and reader.name == "reference"


def test_aiter_reader_unavailable_without_aiter_says_why():
    ok, reason = aiter_reader.availability(MI355)
    assert not ok and reason.startswith("aiter is not installed")
    with pytest.raises(ProducerError, match="reader 'aiter' is unavailable: aiter is not installed"):
        registry.resolve_reader("aiter", spec=CacheSpec())


@pytest.mark.parametrize("nested", [False, True], ids=["pa_mqa_logits", "attention.pa_mqa_logits"])
def test_aiter_reader_found_in_either_module_needs_a_rocm_gpu(monkeypatch, nested):
    install(monkeypatch, aiter_reader_standin.modules(nested=nested))
    found = aiter_reader.load()
    assert found.where.endswith("pa_mqa_logits.deepgemm_fp8_paged_mqa_logits")
    assert ("attention" in found.where) is nested
    assert aiter_reader.availability(MI355)[0]
    ok, reason = aiter_reader.availability(H200)
    assert not ok and "needs a ROCm device" in reason


@pytest.mark.parametrize("spec", [
    pytest.param(CacheSpec(block_size=64, head_dim=128), id="block64-shuffle"),
    pytest.param(CacheSpec(block_size=16, head_dim=64, quant_block_size=64), id="block16-shuffle"),
    pytest.param(CacheSpec(block_size=1, head_dim=128), id="block1-linear"),
])
def test_aiter_reader_called_like_vllm_agrees_with_the_reference(monkeypatch, spec):
    install(monkeypatch, aiter_reader_standin.modules())
    reader = aiter_reader.make_reader(aiter_reader.load(), MI355)
    result = sweep(spec, reader)
    assert not result.reader_fault and result.passed
    for m in result.reader_check + result.columns[0].rows:
        assert m.recall == 1.0 and m.bad == 0 and m.max_rel < 1e-6  # the stand-in rounds to fp32


def test_aiter_reader_on_a_linear_cache_of_block_64_is_a_reader_fault(monkeypatch):
    # vLLM calls it with Preshuffle=block_size > 1: it reads SHUFFLE, whatever was written
    install(monkeypatch, aiter_reader_standin.modules())
    result = sweep(CacheSpec(block_size=64, layout=Layout.LINEAR), aiter_reader.make_reader(aiter_reader.load(), MI355))
    assert result.reader_fault and not result.passed
    assert [ctx for ctx, _ in result.reader_disagreements] == [100, 300]


def test_aiter_reader_refuses_the_other_fp8_format(monkeypatch):
    install(monkeypatch, aiter_reader_standin.modules())
    reader = aiter_reader.make_reader(aiter_reader.load(), MI300)  # gfx942 reads e4m3fnuz
    with pytest.raises(ProducerError, match="reader 'aiter' reads e4m3fnuz on gfx942"):
        sweep(CacheSpec(), reader)


# ---- what a reader must not do (readers/obligations.py) ---------------------------------------------------


def aiter_017(monkeypatch):
    import importlib.util
    from pathlib import Path

    where = Path(__file__).parent / "readers" / "aiter_017_standin.py"
    loaded = importlib.util.spec_from_file_location("aiter_017_standin", where)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    install(monkeypatch, module.modules())
    return aiter_reader.make_reader(aiter_reader.load(), MI355)


def sweep_next_n(spec: CacheSpec, reader, next_n: int, ctx=(100, 300)):
    config = parity_inputs.ParityConfig(ctx=ctx, topk=32, next_n=next_n)
    spec = spec.replace(num_blocks=-(-config.max_ctx // spec.block_size))
    inputs = parity_inputs.generate(spec, config, heads=4, seed=2, shuffled=True)
    return parity.run_parity(spec, config, baseline=producers.resolve("reference"),
                             writers=[producers.resolve("reference")], reader=reader, inputs=inputs, device=CPU)


def test_aiter_017_mtp_leak_fails_naming_the_leaked_position(monkeypatch):
    result = sweep_next_n(CacheSpec(block_size=1), aiter_017(monkeypatch), next_n=2)
    assert result.reader_fault and not result.passed
    # recall alone cannot see it: scored only on the positions a row may see, every row agrees
    assert all(m.recall == 1.0 for m in result.reader_check) and not result.reader_disagreements
    found = result.obligations
    # one leaked position per sequence (row 0 of each: ctx 100 and 300), the same in every read
    assert found.leaks == 2
    first = found.leaked[0]
    assert (first.row, first.sequence, first.mtp_row, first.position, first.last_visible) == (0, 0, 0, 99, 98)
    assert found.outside == 1 and (found.written[0].row, found.written[0].column) == (0, 300)
    text = " ".join(note.text for note in result.notes())
    assert "row 0 (sequence 0, MTP row 0) has" in text and "at position 99; it may see positions 0-98 only" in text
    assert "wrote 1 elements outside its output rows: row 0, column 300 (past the row's 300 logits)" in text


def test_aiter_017_out_of_row_write_fails_even_at_next_n_1(monkeypatch):
    result = sweep_next_n(CacheSpec(block_size=1), aiter_017(monkeypatch), next_n=1)
    assert result.obligations.leaks == 0 and result.obligations.outside == 1
    assert result.reader_fault and not result.passed


@pytest.mark.parametrize("next_n", [1, 2])
def test_a_correct_out_buffer_reader_keeps_its_obligations(monkeypatch, next_n):
    install(monkeypatch, aiter_reader_standin.modules())
    result = sweep_next_n(CacheSpec(block_size=64), aiter_reader.make_reader(aiter_reader.load(), MI355), next_n)
    assert not result.obligations.broken and result.passed


def test_a_reader_returning_finite_logits_where_rows_may_not_look_is_a_fault():
    def no_mask(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
        logits = registry.resolve_reader("reference", spec=spec).fn(q_fp8, kv_cache, weights, context_lens, block_tables,
                                                            max_model_len)
        return torch.where(torch.isinf(logits), torch.zeros_like(logits), logits).float()

    spec = CacheSpec(block_size=1)
    reader = Reader("no-mask", "returns 0 where it should return -inf", no_mask)
    result = sweep_next_n(spec, reader, next_n=2, ctx=(100, 300))
    # every position past each row's last visible one: (300 - 98 - 1) + (300 - 99 - 1) + ... per sequence
    expected = sum(300 - (ctx - 2 + n) - 1 for ctx in (100, 300) for n in range(2))
    assert result.obligations.leaks == expected and result.reader_fault


def test_default_reader_check_covers_mtp_block_sizes_and_both_orders(monkeypatch):
    install(monkeypatch, aiter_reader_standin.modules())
    results = parity.check_reader(lambda spec: aiter_reader.make_reader(aiter_reader.load(), MI355), ctx=(100, 300),
                                  topk=32)
    faults = {case.label: result.reader_fault for case, result in results}
    # vLLM calls aiter with Preshuffle=block_size > 1: it reads shuffle at block 64, so linear there is a fault
    assert faults == {"next_n 1, block 1, linear": False, "next_n 1, block 64, linear": True,
                      "next_n 1, block 64, shuffle": False, "next_n 2, block 1, linear": False,
                      "next_n 2, block 64, linear": True, "next_n 2, block 64, shuffle": False}


def test_default_reader_check_fails_aiter_017_at_every_case(monkeypatch):
    reader = aiter_017(monkeypatch)
    results = parity.check_reader(lambda spec: reader, ctx=(100, 300), topk=32)
    leaks = {case.label: result.obligations.leaks for case, result in results}
    assert all(result.obligations.outside == 1 for _, result in results)  # the store past row 0, in every case
    assert leaks == {"next_n 1, block 1, linear": 0, "next_n 1, block 64, linear": 0,
                     "next_n 1, block 64, shuffle": 0, "next_n 2, block 1, linear": 2,
                     "next_n 2, block 64, linear": 2, "next_n 2, block 64, shuffle": 2}


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "child process"])
def test_a_reader_file_that_fills_a_buffer_is_guarded_in_either_process(isolated):
    from pathlib import Path

    from fp8check.core.isolation import Limits

    name = f"file:{Path(__file__).parent / 'readers' / 'aiter_017_standin.py'}:paged_mqa_logits"
    spec = CacheSpec(block_size=1)
    reader = registry.resolve_reader(name, spec=spec.replace(num_blocks=300),
                             isolation=Limits(timeout_s=120) if isolated else None)
    result = sweep_next_n(spec, reader, next_n=2)
    assert result.obligations.leaks == 2 and result.obligations.outside == 1
    assert (result.obligations.written[0].row, result.obligations.written[0].column) == (0, 300)
    assert result.reader_fault and not result.passed
