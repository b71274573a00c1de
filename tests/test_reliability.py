"""A checker the code under test cannot fool (issue 10): isolated producers, contained stray writes,
strict inputs and outputs, no vacuous or random verdicts.

The hostile writers live in tests/hostile/. Each test names the finding of issue 10 it pins."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from conftest import run
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from fp8check.producers import golden
from fp8check.core import inputs
from fp8check.core.budget import MAX_CODE_DISTANCE, Budget, check
from fp8check.core.reference import aiter_writer
from fp8check.core.cache import CacheBuffer, buffer_bytes, fill_poison, guard_bytes, poison, poison_at
from fp8check.cli import main
from fp8check.run.compare import compare
from fp8check.core.diff import diff_caches
from fp8check.core.errors import InputError
from fp8check.core.isolation import IsolatedError, Limits, run_isolated
from fp8check.core.spec import CacheSpec, Layout
from fp8check.producers import registry as producers

ROOT = Path(__file__).parent.parent
HOSTILE = Path(__file__).parent / "hostile"
CPU = torch.device("cpu")
SMALL = ("--block", "16", "--head-dim", "64", "--num-blocks", "2")  # 2 x 16 x (64 + 4) = 2176 bytes
SMALL_SPEC = CacheSpec(num_blocks=2, block_size=16, head_dim=64, quant_block_size=64)
PAST_THE_END = f"file:{ROOT / 'tests' / 'plugins' / 'reads_past_the_end.py'}:writer"  # an off-by-one token mask


def hostile(target: str) -> str:
    file_name, _, func = target.partition(":")
    return f"file:{HOSTILE / file_name}:{func or 'writer'}"



def against_reference(capsys, candidate: str, *options: str) -> tuple[int, str, str]:
    return run(capsys, "compare", "--baseline", "reference", "--candidate", candidate, *SMALL, *options)


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("fp8check: error: "), err
    for fragment in fragments:
        assert fragment in err, err


# ---- finding 1: a plugin's exit, crash or tampering never becomes a verdict ---------------------------


@pytest.mark.parametrize("command", ["compare", "table", "record"])
def test_sys_exit_at_import_is_exit_2_in_every_command(capsys, tmp_path, command):
    name = hostile("exit_at_import.py")
    out_path = tmp_path / "golden.safetensors"
    argv = {"compare": ["compare", "--baseline", "reference", "--candidate", name, *SMALL],
            "table": ["table", "--baseline", "reference", "--buggy", name, "--block", "16", "--head-dim", "64",
                      "--num-blocks", "2"],
            "record": ["record", "--producer", name, "--out", str(out_path), *SMALL]}[command]
    code, out, err = run(capsys, *argv)
    assert_one_line_error(code, err, f"producer {name!r} called sys.exit(0) while loading its code")
    assert not out_path.exists()


@pytest.mark.parametrize("func, what", [
    ("exit0", "called sys.exit(0) while writing, before returning"),
    ("exit1", "called sys.exit(1) while writing, before returning"),
    ("hard_exit0", "ended its process with exit code 0 while writing, without returning"),
    ("write_then_exit0", "called sys.exit(0) while writing, before returning"),
])
def test_a_writer_that_ends_the_process_is_exit_2_saying_how(capsys, func, what):
    name = hostile(f"exits.py:{func}")
    code, out, err = against_reference(capsys, name)
    assert_one_line_error(code, err, f"producer {name!r} {what}")
    assert out == ""


@pytest.mark.parametrize("func, code", [("exit0", 0), ("exit1", 1), ("write_then_exit0", 0)])
def test_in_process_a_writers_sys_exit_is_its_error_not_fp8checks_exit(capsys, tmp_path, func, code):
    # --in-process gives up the isolation, but a writer's exit never ends fp8check with a verdict's code
    name, report = hostile(f"exits.py:{func}"), tmp_path / "r.json"
    exit_code, out, err = against_reference(capsys, name, "--in-process", "--json", str(report))
    assert_one_line_error(exit_code, err, f"producer {name!r} called sys.exit({code}) while writing, before returning")
    assert out == "" and json.loads(report.read_text())["exit_code"] == 2


def test_in_process_a_sys_exit_at_import_is_exit_2(capsys):
    name = hostile("exit_at_import.py")
    code, _, err = against_reference(capsys, name, "--in-process")
    assert_one_line_error(code, err, f"producer {name!r} called sys.exit(0) while loading its code")


@pytest.mark.parametrize("func, what", [
    ("abort", "aborted (SIGABRT) while writing"),
    ("segfault", "crashed (SIGSEGV) while writing"),
    ("kill_self", "was killed (SIGKILL: out of memory, or killed from outside) while writing"),
])
def test_a_writer_that_crashes_is_exit_2_saying_how(capsys, func, what):
    name = hostile(f"crashes.py:{func}")
    code, _, err = against_reference(capsys, name)
    assert_one_line_error(code, err, f"producer {name!r} {what}")


@pytest.mark.parametrize("func", ["sleeps", "spins"])
def test_a_writer_that_hangs_is_killed_after_the_timeout(capsys, func):
    name = hostile(f"hangs.py:{func}")
    start = time.monotonic()
    code, _, err = against_reference(capsys, name, "--timeout", "0.5")
    assert_one_line_error(code, err, f"producer {name!r} did not finish within the 0.5 s timeout (--timeout)"
                                     " while writing: killed")
    assert time.monotonic() - start < 30  # killed, not waited for


def test_a_writer_over_its_memory_limit_is_exit_2(capsys):
    name = hostile("memory_hog.py")
    code, _, err = against_reference(capsys, name, "--memory-limit", "256")
    assert_one_line_error(code, err, f"producer {name!r} exceeded its memory limit of 268,435,456 bytes"
                                     " (--memory-limit) while writing")


def test_monkeypatching_fp8check_from_a_plugin_cannot_change_the_verdict(capsys, tmp_path):
    import fp8check.core.diff

    before = fp8check.core.diff.diff_caches
    code, out, err = against_reference(capsys, hostile("monkeypatch.py"), "--json", str(tmp_path / "r.json"))
    assert code == 1, err
    assert "DIFFERENT: 2097 of 2176 bytes differ" in out  # zeros, except where the reference wrote 0x00
    assert json.loads((tmp_path / "r.json").read_text())["identical"] is False
    assert fp8check.core.diff.diff_caches is before


@pytest.mark.parametrize("func", ["free_storage", "rebind"])
def test_freeing_or_rebinding_the_cache_writes_nothing_and_is_found(capsys, func):
    code, out, err = against_reference(capsys, hostile(f"tamper.py:{func}"))
    if code == 2:  # a spawned child's cache (CUDA machines) is a shared storage that refuses the resize
        assert func == "free_storage" and "Trying to resize storage that is not resizable" in err
        return
    assert code == 1, err
    assert "DIFFERENT: 2172 of 2176 bytes differ" in out  # 4 reference bytes equal the poison by chance


def test_a_process_left_behind_cannot_change_the_bytes_after_the_run():
    data = inputs.generate(SMALL_SPEC, seed=0)
    reference = producers.run(producers.resolve("reference"), SMALL_SPEC, data, CPU)
    written = producers.run(producers.resolve(hostile("tamper.py:writes_later")), SMALL_SPEC, data, CPU)
    time.sleep(0.8)  # the plugin's grandchild zeroes the shared cache 0.3 s after the run
    assert torch.equal(written.buffer, reference.buffer)


@pytest.mark.parametrize("slots, seed", [(inputs.SlotPattern.SPARSE, 0), (inputs.SlotPattern.SEQUENTIAL, 0),
                                         (inputs.SlotPattern.PADDED, 14)])  # seed 14: token 0 is padding
def test_a_read_past_the_inputs_finds_guard_rows_not_whatever_memory_follows(slots, seed):
    data = inputs.generate(SMALL_SPEC, seed=seed, slots=slots)
    past = producers.resolve(PAST_THE_END)
    written = producers.run(past, SMALL_SPEC, data, CPU).buffer
    # by hand: one token more, K of ones, at the first slot no token maps (every slot mapped: the first
    # mapped token's)
    taken = set(data.slot_mapping.tolist())
    first_mapped = next(s for s in data.slot_mapping.tolist() if s >= 0)
    free = next((s for s in range(SMALL_SPEC.num_slots) if s not in taken), first_mapped)
    expected = CacheBuffer.allocate(SMALL_SPEC, CPU)
    aiter_writer(torch.cat([data.k, torch.ones_like(data.k[:1])]), expected.cache,
                 torch.cat([data.slot_mapping, torch.tensor([free])]), SMALL_SPEC.quant_block_size,
                 SMALL_SPEC.scale_fmt.writer_arg, layout=SMALL_SPEC.layout.value)
    assert torch.equal(written, expected.buffer)
    assert not torch.equal(written, producers.run(producers.resolve("reference"), SMALL_SPEC, data, CPU).buffer)


def test_an_off_by_one_token_mask_is_a_stray_write(capsys):
    code, out, err = against_reference(capsys, PAST_THE_END, "--slots", "sparse")
    assert code == 1, err
    assert "stray-write" in out and "DIFFERENT: 68 of 2176 bytes differ" in out  # one token: 64 values, 4 scale


def test_what_a_plugin_prints_never_reaches_stdout(capfd):
    code = main(["compare", "--baseline", "reference", "--candidate", hostile("prints_a_verdict.py"), *SMALL])
    out, err = capfd.readouterr()
    assert code == 1
    assert "IDENTICAL" not in out and "DIFFERENT: 2097 of 2176 bytes differ" in out
    assert "IDENTICAL: 0 of 2176 bytes differ in 2 blocks" in err  # the plugin's line, on stderr


@pytest.mark.parametrize("func, what", [
    ("forges_a_report", "ended its process with exit code 3 while writing"),
])
def test_a_forged_report_is_refused(capsys, func, what):
    name = hostile(f"tamper.py:{func}")
    code, _, err = against_reference(capsys, name)
    assert_one_line_error(code, err, f"producer {name!r} {what}")


@pytest.mark.parametrize("func, expected", [
    ("writes_floats", "DIFFERENT: 2095 of 2176 bytes differ"),
    ("assigns_bf16", "DIFFERENT: 2167 of 2176 bytes differ"),
])
def test_a_writer_using_the_wrong_dtype_is_judged_by_its_bytes(capsys, func, expected):
    code, out, err = against_reference(capsys, hostile(f"wrong_dtypes.py:{func}"))
    assert code == 1, err
    assert expected in out


def test_a_writer_whose_dtype_view_fails_is_exit_2(capsys):
    name = hostile("wrong_dtypes.py:views_as_int64")
    code, _, err = against_reference(capsys, name)
    assert_one_line_error(code, err, f"producer {name!r} raised RuntimeError:")


def test_isolated_and_in_process_runs_write_the_same_bytes():
    data = inputs.generate(SMALL_SPEC, seed=5, slots=inputs.SlotPattern.PADDED)
    name = f"file:{ROOT / 'tests' / 'plugins' / 'corrupt_one_byte.py'}:writer"
    spec = SMALL_SPEC.replace(num_blocks=3, block_size=64, head_dim=128, quant_block_size=128)
    data = inputs.generate(spec, seed=5, slots=inputs.SlotPattern.PADDED)
    isolated = producers.run(producers.resolve(name), spec, data, CPU)
    in_process = producers.run(producers.resolve(name, isolation=None), spec, data, CPU)
    assert torch.equal(isolated.buffer, in_process.buffer)
    assert not isolated.buffer.is_shared()  # judged on a private copy
    assert producers.resolve(name).provenance == {}  # nothing loaded in this process
    _, ran = producers.run_producer(producers.resolve(name), spec, data, CPU)  # what the child reported
    assert ran.provenance["function"] == "writer" and len(ran.provenance["sha256"]) == 64


def test_a_served_child_shares_the_tensors_too():
    # the start method CUDA needs (a fork of the start server, tensors passed by reduction), on the CPU
    name = f"file:{ROOT / 'tests' / 'plugins' / 'corrupt_one_byte.py'}:writer"
    spec = SMALL_SPEC.replace(num_blocks=3, block_size=64, head_dim=128, quant_block_size=128)
    data = inputs.generate(spec, seed=0)
    expected = producers.run(producers.resolve(name, isolation=None), spec, data, CPU)
    buffer = CacheBuffer.allocate(spec, CPU)
    report = run_isolated("fp8check.producers.registry:run_in_child",
                          (name, spec.to_json(), None, data.k.clone(), data.slot_mapping.clone(), buffer.buffer),
                          limits=Limits(timeout_s=120), label=f"producer {name!r}", start_method="server")
    assert report["provenance"]["function"] == "writer"
    assert torch.equal(buffer.buffer, expected.buffer)


def test_a_user_error_in_the_child_keeps_its_message(capsys):
    code, _, err = against_reference(capsys, f"file:{HOSTILE / 'absent.py'}:writer")
    assert_one_line_error(code, err, "absent.py: no such file")


def test_in_process_runs_the_plugin_here(capsys):
    name = f"file:{ROOT / 'tests' / 'plugins' / 'raises.py'}:writer"
    code, _, err = against_reference(capsys, name, "--in-process")
    assert_one_line_error(code, err, f"producer {name!r} raised RuntimeError: deliberate failure inside the writer")
    with pytest.raises(IsolatedError, match="raised RuntimeError: deliberate failure"):
        producers.run(producers.resolve(name), SMALL_SPEC, inputs.generate(SMALL_SPEC, seed=0), CPU)


# ---- finding 2: duplicate slots, and the same verdict every time ---------------------------------------


def save_inputs(path: Path, k: torch.Tensor, slot_mapping: torch.Tensor | None = None, **extra) -> Path:
    tensors = {"k": k, **({"slot_mapping": slot_mapping} if slot_mapping is not None else {}), **extra}
    save_file(tensors, str(path))
    return path


def k_of(num_tokens: int, head_dim: int = 64) -> torch.Tensor:
    return torch.randn(num_tokens, head_dim, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)


def test_duplicate_slots_in_an_input_file_name_the_slot_and_both_tokens(capsys, tmp_path):
    slots = torch.tensor([0, 5, 3, 5, 7, -1, 3], dtype=torch.int64)
    path = save_inputs(tmp_path / "dup.safetensors", k_of(7), slots)
    code, _, err = run(capsys, "compare", "--input", str(path), "--block", "16", "--head-dim", "64")
    assert_one_line_error(code, err, f"{path}: slot 3 is mapped by tokens 2 and 6")


def test_duplicate_slots_are_refused_by_the_library_before_any_producer_runs():
    data = inputs.Inputs(k_of(4), torch.tensor([1, 2, 1, 0]), "hand-made")
    with pytest.raises(InputError, match="slot 1 is mapped by tokens 0 and 2"):
        producers.run(producers.resolve(hostile("crashes.py:abort")), SMALL_SPEC, data, CPU)


def test_the_same_compare_gives_the_same_verdict_20_times():
    spec = CacheSpec(num_blocks=3, block_size=16, head_dim=64, quant_block_size=32, fp8=inputs.FP8Format.E4M3FNUZ)
    data = inputs.generate(spec, seed=2, slots=inputs.SlotPattern.SHUFFLED, distribution=inputs.Distribution.MIXED)
    base, cand = producers.resolve("reference"), producers.resolve("reference-vllm")
    outcomes = set()
    for _ in range(20):
        result = compare(spec, baseline=base, candidate=cand, inputs=data, device=CPU)
        outcomes.add((result.diff.diff_bytes, tuple(result.diff.block_diff().tolist()),
                      result.diff.first_mismatch.describe()))
    assert len(outcomes) == 1 and next(iter(outcomes))[0] > 0


# ---- finding 3: record --out never replaces what is not a regular file ---------------------------------


def record(capsys, out: Path, *options: str, producer: str = "reference") -> tuple[int, str, str]:
    return run(capsys, "record", "--producer", producer, "--out", str(out), *SMALL, *options)


def test_record_refuses_a_device_or_pipe(capsys, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, _, err = record(capsys, fifo)
    assert_one_line_error(code, err, f"--out {fifo}: is a named pipe (FIFO); give a regular file or a new path")
    assert Path(fifo).is_fifo()


def test_record_refuses_a_symlink_and_keeps_its_target(capsys, tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("keep me")
    link = tmp_path / "link.safetensors"
    link.symlink_to(target)
    code, _, err = record(capsys, link)
    assert_one_line_error(code, err, f"--out {link}: is a symbolic link")
    assert link.is_symlink() and target.read_text() == "keep me"


def test_record_refuses_a_folder(capsys, tmp_path):
    code, _, err = record(capsys, tmp_path)
    assert_one_line_error(code, err, f"--out {tmp_path}: is a folder")


def test_record_replaces_a_regular_file_through_a_temporary_file(capsys, tmp_path):
    out = tmp_path / "golden.safetensors"
    out.write_text("old")
    code, _, err = record(capsys, out)
    assert code == 0, err
    assert set(load_file(str(out))) == {"k", "slot_mapping", "kv_cache", "guards"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["golden.safetensors"]  # no temporary left


# ---- finding 4: stray writes are contained and seen --------------------------------------------------


@pytest.mark.parametrize("spec", [
    CacheSpec(num_blocks=1, block_size=1, head_dim=16, quant_block_size=16),
    CacheSpec(num_blocks=3, block_size=64, head_dim=128, quant_block_size=128),
    CacheSpec(num_blocks=2, block_size=16, head_dim=2048, quant_block_size=128),
])
def test_each_guard_zone_holds_at_least_one_whole_block(spec):
    buffer = CacheBuffer.allocate(spec, CPU)
    assert buffer.guard_bytes >= spec.block_bytes and buffer.guard_bytes % 256 == 0
    assert buffer.buffer.numel() == buffer_bytes(spec) == 2 * buffer.guard_bytes + spec.num_blocks * spec.block_bytes


# block 16, head_dim 16: 16 * (16 + 4) = 320 bytes per block, guards of 512
TINY = CacheSpec(num_blocks=2, block_size=16, head_dim=16, quant_block_size=16)


def test_a_write_at_every_distance_up_to_one_block_before_or_after_the_cache_is_counted():
    data = inputs.generate(TINY, seed=1)
    baseline = producers.run(producers.resolve("reference"), TINY, data, CPU)
    missed = []
    for side in ("before", "after"):
        for distance in range(1, TINY.block_bytes + 1):
            producer = producers.resolve(hostile(f"stray.py:{side}_{distance}"), isolation=None)
            candidate = producers.run(producer, TINY, data, CPU)
            result = diff_caches(TINY, baseline, candidate)
            if (result.guard_diff, result.cache_diff) != (1, 0):
                missed.append((side, distance, result.guard_diff, result.cache_diff))
    assert missed == []


@pytest.mark.parametrize("layout", [Layout.SHUFFLE, Layout.LINEAR])
@pytest.mark.parametrize("func, block", [("slot_past_end", 2), ("block_before", -1)])
def test_an_off_by_one_slot_or_block_lands_wholly_in_a_guard(layout, func, block):
    spec = TINY.replace(layout=layout)
    data = inputs.generate(spec, seed=4)
    baseline = producers.run(producers.resolve("reference"), spec, data, CPU)
    candidate = producers.run(producers.resolve(hostile(f"stray.py:{func}")), spec, data, CPU)
    g = guard_bytes(spec)
    # token 0 (slot 0) as the reference wrote it, at the same in-block positions of block `block`
    positions = [spec.value_offset(0, d) for d in range(spec.head_dim)] + [spec.scale_offset(0, 0) + i for i in range(4)]
    stray = torch.tensor([g + block * spec.block_bytes + p for p in positions])
    assert torch.equal(candidate.buffer[stray], baseline.flat[0][torch.tensor(positions)])
    expected = int((candidate.buffer[stray] != poison(buffer_bytes(spec))[stray]).sum())
    result = diff_caches(spec, baseline, candidate)
    assert (result.guard_diff, result.cache_diff) == (expected, 0) and expected > 10  # of 20 bytes a token


def test_a_slot_outside_the_cache_is_refused_before_any_producer_runs(capsys, tmp_path):
    path = save_inputs(tmp_path / "far.safetensors", k_of(3), torch.tensor([0, 32, 1]))
    code, _, err = run(capsys, "compare", "--input", str(path), *SMALL, "--candidate", hostile("crashes.py:abort"))
    assert_one_line_error(code, err, f"{path}: slot 32 of token 1 is outside the cache (2 blocks of 16: slots 0..31;"
                                     " raise --num-blocks)")


def test_fp8checks_triton_writer_never_writes_outside_its_buffer():
    from fp8check.producers import triton as triton_writer

    spec = TINY
    k = k_of(3, spec.head_dim)
    buffer = CacheBuffer.allocate(spec, CPU)
    # a slot one past the end, one far beyond: inputs are checked before any run, this is the last line
    triton_writer.fixed_writer(k, buffer.cache, torch.tensor([spec.num_slots, 0, 10**6]), 16, "ue8m0",
                               layout=spec.layout.value)
    assert buffer.guard_writes() == 0 and not buffer.cache_untouched()


@pytest.mark.parametrize("num_bytes, start", [(0, 0), (1, 0), (255, 0), (256, 0), (1000, 0), (1000, 77), (513, 300)])
def test_the_tiled_poison_fill_is_the_poison_formula(num_bytes, start):
    expected = poison_at(torch.arange(start, start + num_bytes))
    assert torch.equal(fill_poison(torch.empty(num_bytes, dtype=torch.uint8), start), expected)
    assert torch.equal(poison(num_bytes), poison_at(torch.arange(num_bytes)))


# ---- finding 5: no vacuous passes ---------------------------------------------------------------------


@pytest.mark.parametrize("slots, what", [([], "none of its 0 tokens has a slot >= 0"),
                                         ([-1, -1, -1], "none of its 3 tokens has a slot >= 0")])
def test_no_token_to_write_is_nothing_to_compare(capsys, tmp_path, slots, what):
    path = save_inputs(tmp_path / "empty.safetensors", k_of(len(slots)), torch.tensor(slots, dtype=torch.int64))
    code, _, err = run(capsys, "compare", "--input", str(path), *SMALL)
    assert_one_line_error(code, err, f"nothing to compare: {what}")


def test_a_baseline_that_writes_nothing_is_nothing_to_compare(capsys):
    name = hostile("writes_nothing.py")
    code, _, err = run(capsys, "compare", "--baseline", name, "--candidate", name, *SMALL)
    assert_one_line_error(code, err, f"nothing to compare: the baseline {name!r} wrote no byte of the cache")


def test_the_code_distance_budget_is_bounded(capsys):
    code, _, err = run(capsys, "compare", "--max-code-distance", "1000", *SMALL)
    assert_one_line_error(code, err, "'--max-code-distance': 1000 is not in the range 0<=x<=8")
    with pytest.raises(ValueError, match=r"--max-code-distance must be an integer in \[0, 8\]"):
        Budget(max_code_distance=MAX_CODE_DISTANCE + 1)


def test_the_buggy_wrapper_is_never_within_the_largest_code_distance(capsys):
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", "triton-buggy", *SMALL,
                         "--max-code-distance", str(MAX_CODE_DISTANCE))
    assert code == 1, err
    assert "FAIL over budget" in out and f"max code distance NaN against a number > {MAX_CODE_DISTANCE}" in " ".join(out.split())


def test_nan_against_a_number_is_never_excused():
    data = inputs.generate(SMALL_SPEC, seed=0)
    baseline = producers.run(producers.resolve("reference"), SMALL_SPEC, data, CPU)
    candidate = CacheBuffer(SMALL_SPEC, baseline.buffer.clone())
    candidate.flat[0, 0] = 0x7F  # e4m3fn NaN where the baseline has a number
    assert baseline.flat[0, 0] not in (0x7F, 0xFF)
    verdict = check(Budget(max_code_distance=MAX_CODE_DISTANCE), diff_caches(SMALL_SPEC, baseline, candidate),
                    baseline, candidate)
    assert (verdict.excused, verdict.counted, verdict.within) == (0, 1, False)


def test_record_refuses_a_producer_that_wrote_outside_the_cache(capsys, tmp_path):
    out = tmp_path / "stray.safetensors"
    name = hostile("stray.py:after_16")
    code, _, err = record(capsys, out, producer=name)
    assert_one_line_error(code, err, f"producer {name!r} wrote 1 bytes outside the cache; not recorded")
    assert not out.exists()


def forge(path: Path, out: Path, *, key: bytes | None = None, metadata_changes: dict | None = None, **tensors) -> Path:
    """A golden file edited by someone who knows the format: checksum recomputed (with `key`: re-signed)."""
    with safe_open(str(path), framework="pt") as f:
        metadata = dict(f.metadata())
    data = {**load_file(str(path)), **tensors}
    metadata = {**metadata, **(metadata_changes or {})}
    for name in golden.CHECKSUMS:
        metadata.pop(name, None)
    metadata["hmac-sha256" if key else "sha256"] = golden.checksum(data, metadata, key)
    save_file(data, str(out), metadata=metadata)
    return out


@pytest.fixture
def recorded(capsys, tmp_path) -> Path:
    out = tmp_path / "reference.safetensors"
    code, _, err = record(capsys, out)
    assert code == 0, err
    return out


def test_a_golden_file_with_dirty_guard_zones_is_refused_as_forged(capsys, tmp_path, recorded):
    # record refuses runs that write outside the cache: dirty guards were never recorded, so the
    # correct candidate is never blamed for them
    guards = load_file(str(recorded))["guards"].clone()
    guards[-1] ^= 0xFF
    forged = forge(recorded, tmp_path / "forged.safetensors", guards=guards)
    code, out, err = run(capsys, "compare", "--baseline", f"golden:{forged}", "--candidate", "reference")
    assert_one_line_error(code, err, f"{forged}: its guard zones do not hold the poison fill that every recording"
                                     " has: the file was forged or damaged")


@pytest.mark.parametrize("slots, what", [([0] * 2 + list(range(2, 32)), "slot 0 is mapped by tokens 0 and 1"),
                                         (list(range(31)) + [32], "slot 32 of token 31 is outside the cache")])
def test_a_forged_golden_file_with_bad_slots_is_refused(capsys, tmp_path, recorded, slots, what):
    forged = forge(recorded, tmp_path / "forged.safetensors", slot_mapping=torch.tensor(slots, dtype=torch.int64))
    code, _, err = run(capsys, "compare", "--baseline", f"golden:{forged}", "--candidate", "triton")
    assert_one_line_error(code, err, f"{forged}: {what}")


# ---- finding 6: user errors are exit 2, checker errors exit 3 ------------------------------------------


@pytest.mark.parametrize("options, fragment", [
    (("--max-diff-fraction", "nan"), "Invalid value for '--max-diff-fraction': nan is not a finite number"),
    (("--num-blocks", str(2**62)), f"--num-blocks {2**62}, --block 64, --head-dim 128 (two caches, the diff and K)"
                                   " needs"),
    (("--num-blocks", str(10**9)), "bytes, only"),
])
def test_impossible_options_are_exit_2(capsys, options, fragment):
    code, _, err = run(capsys, "compare", *options)
    assert_one_line_error(code, err, fragment)


@pytest.mark.parametrize("line, fragment", [('layout = "bogus"', "[table]: layout = 'bogus': 'bogus' is not one of"),
                                            ("slots = 3", "[table]: slots must be a string, got 3"),
                                            ('seed = "abc"', "[table]: seed must be an integer, got 'abc'"),
                                            ('fp8 = "e5m2"', "[table]: fp8 = 'e5m2': 'e5m2' is not one of")])
def test_a_bad_value_in_a_config_file_is_exit_2(capsys, tmp_path, line, fragment):
    config = tmp_path / "table.toml"
    config.write_text(f"[table]\n{line}\n")
    code, _, err = run(capsys, "table", "--config", str(config))
    assert_one_line_error(code, err, fragment)


def test_an_input_slot_too_large_for_memory_names_the_input(capsys, tmp_path):
    path = save_inputs(tmp_path / "far.safetensors", k_of(2), torch.tensor([0, 10**12]))
    code, _, err = run(capsys, "compare", "--input", str(path), "--block", "16", "--head-dim", "64")
    assert_one_line_error(code, err, f"--input {path}: its slot {10**12} makes --num-blocks 62500000001", "available")


def cli_subprocess(*argv: str, limit_as: int | None = None, **popen) -> subprocess.CompletedProcess:
    def limit():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fp8check", *argv], env=env, preexec_fn=limit, timeout=120,
                          **{"capture_output": True, "text": True, **popen})


def test_a_head_dim_that_cannot_fit_under_ulimit_v_is_exit_2():
    # 4 GiB of address space (ulimit -v): head_dim 2^20 needs ~4.5 GB for caches, diff and K
    done = cli_subprocess("compare", "--head-dim", str(2**20), limit_as=4 * 2**30)
    assert done.returncode == 2, done.stderr
    ours = [line for line in done.stderr.splitlines() if line.startswith("fp8check")]  # torch may warn first:
    assert len(ours) == 1 and ours[0].startswith(  # CUDA's start fails under the limit on a GPU machine
        "fp8check: error: --num-blocks 3, --block 64, --head-dim 1048576"), done.stderr


def test_a_checker_error_stays_exit_3_with_debug(capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in the checker")

    monkeypatch.setattr("fp8check.run.compare.diff_caches", broken)  # stands for a bug of fp8check itself
    code, _, err = run(capsys, "compare", *SMALL, "--debug")
    assert code == 3
    assert "Traceback" in err and "fp8check: internal error: ZeroDivisionError: a bug in the checker" in err


# ---- finding 7: nothing given is silently dropped ------------------------------------------------------


def test_an_unknown_tensor_in_an_input_file_is_named_with_a_hint(capsys, tmp_path):
    path = save_inputs(tmp_path / "typo.safetensors", k_of(4), slot_mappings=torch.arange(4))
    code, _, err = run(capsys, "compare", "--input", str(path), "--block", "16", "--head-dim", "64")
    assert_one_line_error(code, err, "unknown tensor(s) 'slot_mappings' (did you mean 'slot_mapping'?)")


@pytest.mark.parametrize("option, value", [("--seed", "3"), ("--slots", "shuffled"), ("--inputs", "ties"),
                                           ("--specials-inf-nan", None)])
def test_options_an_input_file_overrides_are_refused(capsys, tmp_path, option, value):
    path = save_inputs(tmp_path / "k.safetensors", k_of(4))
    code, _, err = run(capsys, "compare", "--input", str(path), "--head-dim", "64", option, *([value] if value else []))
    assert_one_line_error(code, err, f"{option} cannot be combined with --input")


def test_qbs_0_is_refused(capsys):
    code, _, err = run(capsys, "compare", "--qbs", "0")
    assert_one_line_error(code, err, "'--qbs': 0 is not in the range x>=1")


@pytest.mark.parametrize("key, value", [("emulated", "false"), ("producer", "aiter"), ("torch", "9.9.9"),
                                        ("fp8check", "9.9.9"), ("extra", "x")])
def test_the_golden_checksum_covers_every_metadata_key(capsys, tmp_path, recorded, key, value):
    with safe_open(str(recorded), framework="pt") as f:
        metadata = dict(f.metadata())
    edited = tmp_path / "edited.safetensors"
    save_file(load_file(str(recorded)), str(edited), metadata={**metadata, key: value})
    code, _, err = run(capsys, "compare", "--baseline", f"golden:{edited}", "--candidate", "reference")
    assert_one_line_error(code, err, "checksum mismatch: the file was modified or damaged after recording")


def test_a_golden_key_signs_and_verifies_recordings(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FP8CHECK_GOLDEN_KEY", "ci-secret")
    signed = tmp_path / "signed.safetensors"
    assert record(capsys, signed)[0] == 0
    replay = ("compare", "--baseline", f"golden:{signed}", "--candidate", "reference")
    assert run(capsys, *replay)[0] == 0
    # forged without the key: relabelled as real aiter, plain checksum recomputed
    forged = forge(signed, tmp_path / "forged.safetensors", metadata_changes={"emulated": "false"})
    code, _, err = run(capsys, "compare", "--baseline", f"golden:{forged}", "--candidate", "reference")
    assert_one_line_error(code, err, "not signed, and FP8CHECK_GOLDEN_KEY is set")
    resigned = forge(signed, tmp_path / "resigned.safetensors", key=b"other", metadata_changes={"emulated": "false"})
    code, _, err = run(capsys, "compare", "--baseline", f"golden:{resigned}", "--candidate", "reference")
    assert_one_line_error(code, err, "checksum mismatch", "signed with another key")
    monkeypatch.delenv("FP8CHECK_GOLDEN_KEY")
    code, _, err = run(capsys, *replay)
    assert_one_line_error(code, err, "signed with a key (hmac-sha256); set FP8CHECK_GOLDEN_KEY")


@pytest.mark.parametrize("func, argument", [("modifies_k", "k"), ("modifies_slot_mapping", "slot_mapping")])
def test_a_producer_that_modifies_its_inputs_fails_the_verdict(capsys, tmp_path, func, argument):
    name = hostile(f"tamper.py:{func}")
    code, out, err = against_reference(capsys, name, "--json", str(tmp_path / "r.json"))
    assert code == 1, err
    assert "IDENTICAL" not in out  # equal cache bytes, but the run cannot be trusted
    assert f"FAIL: candidate {name!r} modified its {argument} in place; 0 of 2176 cache bytes differ" in " ".join(out.split())
    assert json.loads((tmp_path / "r.json").read_text())["modified_inputs"] == {"baseline": [], "candidate": [argument]}


# ---- finding 8: words ----------------------------------------------------------------------------------


def test_guard_bytes_are_never_counted_against_the_cache_total(capsys):
    code, out, err = against_reference(capsys, hostile("stray.py:after_1"))
    assert code == 1, err
    assert ("DIFFERENT: 0 of 2176 bytes differ (0.0%) in 0 of 2 blocks; plus 1 of the 2560 guard bytes outside"
            " the cache (1 differing bytes in all)") in " ".join(out.split())


def test_a_closed_stdout_changes_neither_the_exit_code_nor_the_json(tmp_path):
    # `fp8check compare --json FILE | true`: the reader is gone before anything is printed
    read, write = os.pipe()
    os.close(read)
    try:
        done = cli_subprocess("compare", *SMALL, "--json", str(tmp_path / "r.json"), stdout=write,
                              capture_output=False, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["identical"] is True
