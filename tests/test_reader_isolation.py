"""Readers from files run in a child process by default, like writers from files (issue 10): nothing a
reader does except returning logits can reach the parity verdict. The hostile readers live in
tests/hostile/ (readers.py, reader_monkeypatch.py); the numerically wrong ones in tests/readers/."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from conftest import on_cpu
import pytest
import torch

import fp8check.run.parity
import fp8check.core.metrics as metrics
from fp8check.run import parity, parity_inputs
from fp8check.cli import main
from fp8check.core.errors import UserError
from fp8check.core.inputs import Inputs
from fp8check.core.isolation import IsolatedError, Limits
from fp8check.core.producer import Reader
from fp8check.producers import readers, registry
from fp8check.core.spec import CacheSpec, FP8Format, Layout, ScaleFormat
from fp8check.producers import registry as producers

HERE = Path(__file__).parent
HOSTILE = HERE / "hostile"
LINEAR = HERE / "readers" / "linear_reader.py"
VLLM_TORCH = f"vllm-file:{HERE / 'readers' / 'vllm_style_readers.py'}:fp8_paged_mqa_logits_torch"
CPU = torch.device("cpu")
CONFIG = parity_inputs.ParityConfig(ctx=(20, 64, 200), topk=32)
SMALL = ("--heads", "4", "--topk", "32", "--ctx", "20,64,200", "--baseline", "reference",
         "--writers", "reference,reference-vllm")


def hostile(target: str) -> str:
    file_name, _, func = target.partition(":")
    return f"file:{HOSTILE / file_name}:{func}"


def spec_for(layout: Layout | None = None):
    return parity_inputs.cache_spec(CONFIG, CacheSpec(num_blocks=1, block_size=64, head_dim=128, quant_block_size=128,
                                               fp8=FP8Format.E4M3FN, scale_fmt=ScaleFormat.UE8M0, layout=layout))


def sweep(reader: Reader, spec) -> parity.ParityResult:
    """The small sweep of tests/test_parity.py's SMALL, through the library."""
    data = parity_inputs.generate(spec, CONFIG, heads=4, seed=0, shuffled=False)
    return parity.run_parity(spec, CONFIG, baseline=producers.resolve("reference"),
                             writers=[producers.resolve("reference"), producers.resolve("reference-vllm")],
                             reader=reader, inputs=data, device=CPU)


def reader_args(spec) -> tuple:
    """A reader's arguments on the reference writer's bytes, as run_parity builds them."""
    data = parity_inputs.generate(spec, CONFIG, heads=4, seed=0, shuffled=False)
    written = Inputs(data.k, data.slot_mapping(CONFIG.max_ctx, spec.block_size), data.source)
    cache = producers.run(producers.resolve("reference"), spec, written, CPU)
    batch = parity.make_batch(spec, CONFIG, data, CPU)
    kv = cache.cache.view(spec.num_blocks, spec.block_size, 1, spec.row_bytes)
    return batch.q_fp8, kv, batch.weights, batch.context_lens, batch.block_tables, batch.max_model_len


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(on_cpu(argv))
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), err


def assert_one_line_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert out == ""
    line = err.strip()  # the progress bar (stderr, transient) may leave an empty line
    assert "\n" not in line and line.startswith("fp8check: error: "), err
    for fragment in fragments:
        assert fragment in err, err


# ---- where a reader runs, and what comes back -----------------------------------------------------------


def test_a_reader_from_a_file_runs_in_a_child_process_unless_in_process():
    spec, name = spec_for(), hostile("readers.py:pid")
    isolated = registry.resolve_reader(name, spec=spec)
    assert isolated.isolation == producers.DEFAULT_ISOLATION
    logits = readers.run_reader(isolated, *reader_args(spec))
    assert logits.dtype == torch.float64  # the reader's own dtype, carried back exactly
    child = logits.flatten()[0].item()
    assert child != os.getpid() and bool((logits == child).all())
    here = readers.run_reader(registry.resolve_reader(name, spec=spec, isolation=None), *reader_args(spec))
    assert bool((here == os.getpid()).all())


def test_isolated_and_in_process_readers_return_the_same_logits():
    spec = spec_for()
    args = reader_args(spec)
    isolated, ran = readers.run_reader_reporting(registry.resolve_reader(VLLM_TORCH, spec=spec), *args)
    in_process, loaded = readers.run_reader_reporting(registry.resolve_reader(VLLM_TORCH, spec=spec, isolation=None), *args)
    assert isolated.dtype == in_process.dtype == torch.float32
    assert torch.equal(isolated.view(torch.int32), in_process.view(torch.int32))  # bit for bit, -inf included
    # what ran, as the child reported it: the same file, function, hash and bound platform names
    for key in ("loader", "file", "function", "sha256", "bound"):
        assert ran.provenance[key] == loaded.provenance[key], key
    assert ran.description == loaded.description == f"fp8_paged_mqa_logits_torch from {VLLM_TORCH.split(':')[1]}"


@pytest.mark.parametrize("isolation", [producers.DEFAULT_ISOLATION, None], ids=["isolated", "in-process"])
def test_a_scribbling_reader_cannot_touch_fp8checks_tensors(isolation):
    spec = spec_for()
    args = reader_args(spec)
    before = [a.clone() for a in args[:-1]]
    reader = registry.resolve_reader(f"file:{HERE / 'readers' / 'misbehaving.py'}:scribbles", spec=spec, isolation=isolation)
    logits = readers.run_reader(reader, *args)
    assert logits.shape == (3, 200) and bool((logits == 0).all())
    assert all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(args[:-1], before))


def test_the_parity_report_shows_what_the_isolated_reader_ran(capsys, tmp_path):
    out_json = tmp_path / "parity.json"
    code, out, err = run(capsys, "parity", *SMALL, "--reader", f"file:{LINEAR}:paged_mqa_logits",
                         "--json", str(out_json))
    assert code == 1 and "READER FAULT" in out, err  # row-major reader, SHUFFLE cache: as in-process
    sha256 = hashlib.sha256(LINEAR.read_bytes()).hexdigest()
    reader = json.loads(out_json.read_text())["reader"]
    assert reader["description"] == f"paged_mqa_logits from {LINEAR}"
    assert reader["provenance"] == {"loader": "file", "file": str(LINEAR), "sha256": sha256,
                                    "function": "paged_mqa_logits"}
    assert f"reader: paged_mqa_logits from {LINEAR}, sha256 {sha256}" in out


def test_an_isolated_sweep_scores_exactly_as_an_in_process_one():
    spec = spec_for(Layout.LINEAR)  # the linear reader agrees here: finite max_rel, comparable records
    name = f"file:{LINEAR}:paged_mqa_logits"
    isolated = sweep(registry.resolve_reader(name, spec=spec), spec)
    in_process = sweep(registry.resolve_reader(name, spec=spec, isolation=None), spec)
    assert isolated.passed and in_process.passed
    assert isolated.columns == in_process.columns and isolated.reader_check == in_process.reader_check
    assert isolated.reader.provenance == in_process.reader.provenance


# ---- hostile readers: an exit, a crash, a hang or tampering never becomes a verdict -------------------


@pytest.mark.parametrize("target, what", [
    ("readers.py:exit0", "called sys.exit(0) while reading, before returning"),
    ("readers.py:hard_exit0", "ended its process with exit code 0 while reading, without returning"),
    ("exit_at_import.py:writer", "called sys.exit(0) while loading its code"),
    ("readers.py:abort", "aborted (SIGABRT) while reading"),
])
def test_a_reader_that_ends_or_crashes_the_process_is_exit_2_saying_how(capsys, target, what):
    name = hostile(target)
    code, out, err = run(capsys, "parity", *SMALL, "--reader", name)
    assert_one_line_error(code, out, err, f"reader {name!r} {what}")


@pytest.mark.parametrize("target, what", [
    ("readers.py:exit0", "called sys.exit(0) while reading, before returning"),
    ("exit_at_import.py:writer", "called sys.exit(0) while loading its code"),
])
def test_in_process_a_readers_sys_exit_is_exit_2_in_the_same_words(capsys, target, what):
    name = hostile(target)
    code, out, err = run(capsys, "parity", *SMALL, "--reader", name, "--in-process")
    assert_one_line_error(code, out, err, f"reader {name!r} {what}")


@pytest.mark.parametrize("func", ["sleeps", "spins"])
def test_a_reader_that_hangs_is_killed_after_the_timeout(func):
    spec, name = spec_for(), hostile(f"readers.py:{func}")
    start = time.monotonic()
    with pytest.raises(IsolatedError) as raised:
        sweep(registry.resolve_reader(name, spec=spec, isolation=Limits(timeout_s=0.5)), spec)
    assert isinstance(raised.value, UserError)  # exit 2, never a verdict
    assert str(raised.value) == f"reader {name!r} did not finish within the 0.5 s timeout (--timeout) while reading: killed"
    assert time.monotonic() - start < 30  # killed, not waited for


def test_a_reader_monkeypatching_fp8checks_metrics_cannot_change_the_verdict(capsys, tmp_path):
    before = (metrics.compare_logits, metrics.recall_at_k, fp8check.run.parity.compare_logits)
    out_json = tmp_path / "parity.json"
    code, out, err = run(capsys, "parity", *SMALL, "--reader", hostile("reader_monkeypatch.py:paged_mqa_logits"),
                         "--json", str(out_json))
    assert code == 1 and "READER FAULT" in out and out.rstrip().endswith("READER FAULT"), err
    payload = json.loads(out_json.read_text())
    assert payload["passed"] is False and payload["reader_fault"] is True
    scored = [r for r in payload["reader_check"] + payload["records"] if not r["vacuous"]]
    assert scored and all(r["recall"] < 1 for r in scored)  # constant logits rank nothing: scored as such
    assert (metrics.compare_logits, metrics.recall_at_k, fp8check.run.parity.compare_logits) == before


def test_the_same_monkeypatching_reader_in_process_passes_which_is_why_readers_are_isolated(monkeypatch):
    for module, attribute in ((metrics, "compare_logits"), (metrics, "recall_at_k"), (fp8check.run.parity, "compare_logits")):
        monkeypatch.setattr(module, attribute, getattr(module, attribute))  # restored after the test
    spec = spec_for()
    reader = registry.resolve_reader(hostile("reader_monkeypatch.py:paged_mqa_logits"), spec=spec, isolation=None)
    result = sweep(reader, spec)
    # the attack works where the reader shares fp8check's process: its constant logits score perfect recall
    assert not result.reader_disagreements and all(m.recall == 1.0 for m in result.reader_check)
    assert result.obligations.leaks  # only its zeros where rows may not look (they must be -inf) still show
