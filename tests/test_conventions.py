"""Conventions real writers differ in: where padding goes (--pad-slot). SGLang pads with a valid dummy slot that
is written; vLLM and aiter give padding slot -1 and write nothing for it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import run
from fp8check.api import compare_writers
from fp8check.core.cache import poison_at
from fp8check.run.compare import compare
from fp8check.diagnose import Category, diagnose
from fp8check.core.inputs import SlotPattern, generate
from fp8check.core.spec import CacheSpec
from fp8check.producers import registry as producers

CPU = torch.device("cpu")
FAULTS = Path(__file__).parent / "faults"


def no_negative_guard(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
                      layout=None):
    """Like SGLang's `_set_k_and_s_triton`: no `slot < 0` guard, every token is stored at its slot (a -1 lands
    on the last slot, as a negative index does)."""
    from fp8check.core.cache import scatter_rows
    from fp8check.core.reference import AITER, quantize, spec_of_call

    spec = spec_of_call(k, kv_cache, quant_block_size, scale_fmt, fp8_dtype, layout)
    codes, scales = quantize(k, profile=AITER, fmt=spec.fp8, scale_fmt=spec.scale_fmt, quant_block_size=quant_block_size)
    scatter_rows(spec, kv_cache, torch.remainder(slot_mapping, spec.num_slots), codes, scales)


WRITER = producers.Producer("no-negative-guard", "stores every token at its slot", no_negative_guard,
                            keywords=frozenset({"fp8_dtype", "layout"}))


def run_pair(pad_slot: int, spec: CacheSpec = CacheSpec()):
    inputs = generate(spec, seed=0, slots=SlotPattern.PADDED)
    result = compare(spec, baseline=producers.resolve("reference"), candidate=WRITER, inputs=inputs, device=CPU,
                     pad_slot=pad_slot)
    return inputs, result, diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)


def test_padding_written_to_the_dummy_slot_is_not_a_stray_write():
    inputs, result, found = run_pair(pad_slot=0)
    assert result.identical and len(found) == 0
    # slot 0 is reserved: the token that mapped there is padding now, and neither cache holds its bytes
    assert int((result.inputs.slot_mapping == 0).sum()) == 0 and int((inputs.slot_mapping == 0).sum()) == 1
    spec = result.spec
    guard = result.baseline.buffer.guard_bytes
    slot0 = torch.cat([spec.value_index()[0], spec.scale_index().view(spec.block_size, -1)[0]]) + guard
    for side in (result.baseline, result.candidate):
        assert torch.equal(side.buffer.buffer[slot0], poison_at(slot0))


def test_the_same_writer_without_the_convention_writes_stray_bytes():
    # slot -1: padding must write nothing; this writer puts it on the last slot
    _, result, found = run_pair(pad_slot=-1)
    spec = result.spec
    last = spec.num_slots - 1
    block, token = divmod(last, spec.block_size)
    at = torch.cat([spec.value_index()[token], spec.scale_index().view(spec.block_size, -1)[token]])
    expected = int((result.baseline.buffer.flat[block, at] != result.candidate.buffer.flat[block, at]).sum())
    assert result.diff.diff_bytes == expected > 0
    assert found.top.category is Category.STRAY_WRITE and found.top.bytes == expected


def test_a_dummy_slot_writer_that_writes_elsewhere_is_still_caught():
    # the writer sends padding to the last slot whatever --pad-slot says: with --pad-slot 0 that is a stray write
    spec = CacheSpec()
    inputs = generate(spec, seed=0, slots=SlotPattern.PADDED)
    elsewhere = producers.Producer("pads-to-last", "padding to the last slot", lambda k, kv, slots, qbs, fmt:
                                   no_negative_guard(k, kv, torch.where(slots == 0, -1, slots), qbs, fmt))
    result = compare(spec, baseline=producers.resolve("reference"), candidate=elsewhere, inputs=inputs, device=CPU,
                     pad_slot=0)
    assert not result.identical


def test_pad_slot_outside_the_cache_is_refused(capsys):
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", "reference", "--pad-slot", "192")
    assert code == 2 and "--pad-slot 192: must be -1 or a slot of the cache (0-191)" in err


def test_cli_and_api_take_the_convention(capsys):
    fault = f"file:{FAULTS / 'writes_padding.py'}:writer"
    code, out, _ = run(capsys, "compare", "--baseline", "reference", "--candidate", fault, "--slots", "padded",
                       "--pad-slot", "0", "--quiet")
    assert code == 0 and "IDENTICAL" in out
    code, out, _ = run(capsys, "compare", "--baseline", "reference", "--candidate", fault, "--slots", "padded",
                       "--quiet")
    assert code == 1
    assert compare_writers(no_negative_guard, "reference", slots="padded", pad_slot=5).identical
    assert not compare_writers(no_negative_guard, "reference", slots="padded").identical


# ---- caches handed over as strided per-layer views of one allocation (--layers) ------------------------------


def through_storage(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """A writer that assumes its cache is contiguous: it writes the whole cache's bytes from the view's first
    byte on, through the storage (as a kernel given data_ptr() and no strides does)."""
    contiguous = torch.empty(kv_cache.shape, dtype=torch.uint8)
    contiguous.copy_(kv_cache)
    producers.resolve("reference").writer(k, contiguous, slot_mapping, quant_block_size, scale_fmt)
    storage = torch.as_strided(kv_cache, (kv_cache.numel(),), (1,), kv_cache.storage_offset())
    storage.copy_(contiguous.view(-1))


def test_a_stride_aware_writer_writes_the_same_bytes_in_a_layer_view():
    single, layered = CacheSpec(), CacheSpec(layers=3)
    assert layered.layer == 1 and "layer 1 of 3 (strided view)" in layered.summary()
    data = generate(single, seed=0)
    written = [compare(spec, baseline=producers.resolve("reference"), candidate=producers.resolve("reference-vllm"),
                       inputs=data, device=CPU) for spec in (single, layered)]
    assert all(r.identical for r in written)
    assert torch.equal(written[0].candidate.buffer.buffer, written[1].candidate.buffer.buffer)


def test_writes_into_other_layers_are_writes_outside_the_cache():
    spec = CacheSpec(layers=3)
    data = generate(spec, seed=0)
    result = compare(spec, baseline=producers.resolve("reference"),
                     candidate=producers.Producer("through-storage", "ignores strides", through_storage),
                     inputs=data, device=CPU)
    found = diagnose(spec, result.baseline.buffer, result.candidate.buffer, result.inputs)
    causes = found.by_category()
    # blocks 1 and 2 went to other layers (block 0's next layer, block 1's previous one): 128 tokens never reach
    # the writer's layer, and their bytes land outside it
    assert causes[Category.UNWRITTEN].facts["tokens_never_written"] == 128
    assert causes[Category.STRAY_WRITE].bytes == result.diff.guard_diff > 0
    from fp8check.diagnose.words import explain

    assert "outside the cache (guard bytes, or the buffer's other layers)" in explain(causes[Category.STRAY_WRITE], spec)[0]


def test_a_writer_that_needs_a_contiguous_cache_says_so(capsys):
    # examples/my_kernels.py views the whole cache as one flat tensor: a strided layer view cannot be (the
    # built-in triton writer, its twin, refuses --layers before running: test_triton.py)
    writer = f"file:{Path(__file__).parents[1] / 'examples' / 'my_kernels.py'}:indexer_k_quant_and_cache"
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", writer, "--layers", "2")
    assert code == 2 and f"producer '{writer}' raised RuntimeError: view size is not compatible" in err
    assert "my_kernels.py:" in err and ": scales = kv_cache.view(-1)" in err
