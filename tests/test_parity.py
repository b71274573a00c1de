"""`fp8check parity`: the metrics on hand-made logits, the reference reader against an independent
computation, reader plugins and faults, MTP masking, inputs, and the seed config end to end."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

from conftest import on_cpu
import pytest
import torch
from safetensors.torch import save_file

from fp8check.core import fp8
from fp8check.run import parity, parity_inputs
from fp8check.cli import main
from fp8check.core.errors import ProducerError
from fp8check.core.inputs import Inputs
from fp8check.core.producer import Reader
from fp8check.producers import readers, registry
from fp8check.core.metrics import compare_logits, positional_at_k, recall_at_k, visible_tokens
from fp8check.producers.reader_reference import make_reader, paged_logits
from fp8check.core.spec import CacheSpec, FP8Format, Layout
from fp8check.producers import registry as producers

HERE = Path(__file__).parent
CONFIG = HERE.parent / "configs" / "seed-parity.toml"
CPU = torch.device("cpu")


def reader_plugin(func: str = "paged_mqa_logits", file: str = "linear_reader.py") -> str:
    return f"file:{HERE / 'readers' / file}:{func}"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout with its whitespace collapsed (rich wraps at the terminal's width), stderr."""
    code = main(on_cpu(argv))
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), err


# Small sweeps: the reference writers (fast anywhere), few heads, K below the context lengths.
SMALL = ("--heads", "4", "--topk", "32", "--ctx", "20,64,200", "--baseline", "reference",
         "--writers", "reference,reference-vllm")


# ---- metrics on hand-made logits ---------------------------------------------------------------------


def test_recall_counts_ties_at_the_kth_logit_as_correct():
    truth = torch.tensor([5.0, 3.0, 3.0, 3.0, 1.0], dtype=torch.float64)
    # K = 2: the truth's 2nd largest is 3; tokens 1, 2, 3 are all equally good second choices
    for second in (1, 2, 3):
        candidate = torch.zeros(5, dtype=torch.float64)
        candidate[[0, second]] = 1.0
        assert recall_at_k(candidate, truth, 2) == (2, 2)
    candidate = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0], dtype=torch.float64)  # token 4 is not in the top 2
    assert recall_at_k(candidate, truth, 2) == (1, 2)


@pytest.mark.parametrize("k", [1, 7, 64])
def test_one_swapped_token_gives_recall_k_minus_1_over_k(k):
    truth = torch.randperm(200, generator=torch.Generator().manual_seed(k)).double()
    order = torch.argsort(truth, descending=True)
    candidate = truth.clone()
    candidate[order[k - 1]], candidate[order[k]] = truth[order[k]], truth[order[k - 1]]  # K-th and (K+1)-th swap
    m = compare_logits(candidate.view(1, -1), truth.view(1, -1), [200], k)
    assert m.recall == (k - 1) / k
    assert not m.vacuous and m.n == 200


def test_positional_compares_the_sorted_index_lists_position_by_position():
    truth = torch.tensor([9.0, 8.0, 7.0, 1.0, 0.0], dtype=torch.float64)  # top 3: [0, 1, 2]
    candidate = torch.tensor([9.0, 0.0, 7.0, 8.0, 1.0], dtype=torch.float64)  # top 3: [0, 2, 3]
    assert positional_at_k(candidate, truth, 3) == (1, 3)  # only position 0 agrees (0 = 0; 2 != 1; 3 != 2)
    assert recall_at_k(candidate, truth, 3) == (2, 3)


def test_vacuous_rows_score_1_for_any_candidate():
    truth = torch.arange(10, dtype=torch.float64).view(1, -1)
    candidate = -truth  # the exact opposite ranking
    m = compare_logits(candidate, truth, [10], 10)
    assert m.vacuous and m.recall == 1.0 and m.positional == 1.0
    assert not compare_logits(candidate, truth, [10], 9).vacuous
    assert compare_logits(candidate, truth, [10], 9).recall == 8 / 9


def test_max_rel_and_bad_count_against_the_tolerances():
    truth = torch.tensor([[2.0, -4.0, 1.0, 0.5]], dtype=torch.float64)
    candidate = truth.clone()
    candidate[0, 2] += 0.02  # > 1e-3 + 1e-3 * 1
    candidate[0, 3] += 0.001  # <= 1e-3 + 1e-3 * 0.5
    m = compare_logits(candidate, truth, [4], 2, rtol=1e-3, atol=1e-3)
    assert m.bad == 1 and m.n == 4
    assert m.max_rel == pytest.approx(0.02 / 4.0, rel=1e-12)
    candidate[0, 0] = float("nan")
    m = compare_logits(candidate, truth, [4], 2)
    assert m.bad == 2 and m.max_rel != m.max_rel  # NaN is bad and poisons max_rel


def test_mtp_rows_see_ctx_minus_next_n_plus_n_plus_1_tokens():
    assert visible_tokens(100, 1) == [100]
    assert visible_tokens(100, 2) == [99, 100]
    truth = torch.arange(2 * 5, dtype=torch.float64).view(2, 5)
    m = compare_logits(truth.clone(), truth, visible_tokens(5, 2), 4)  # row 0 sees 4 = K, row 1 sees 5
    assert not m.vacuous and m.n == 9 and m.visible == (4, 5) and m.recall == 1.0
    assert compare_logits(truth.clone(), truth, visible_tokens(4, 2), 4).vacuous


# ---- the reference reader against an independent computation -----------------------------------------


def _value_byte(layout: Layout, t: int, d: int, head_dim: int) -> int:
    """SPEC.md section 2, written out again here."""
    if layout is Layout.LINEAR:
        return t * head_dim + d
    return (t // 16) * 16 * head_dim + (d // 16) * 256 + (t % 16) * 16 + d % 16


def _loop_logits(spec, raw: bytes, q, weights, lens, tables, next_n, max_len):
    """Token by token, byte by byte, in Python floats: FP8 decoded by torch's own dtype, scales by struct."""
    def decode(code: int) -> float:
        return torch.tensor([code], dtype=torch.uint8).view(spec.fp8.torch_dtype()).float().item()

    out = []
    for b, ctx in enumerate(lens):
        keys = []
        for t in range(ctx):
            base = tables[b][t // spec.block_size] * spec.block_bytes
            tt = t % spec.block_size
            scale = [struct.unpack_from("<f", raw, base + spec.block_size * spec.head_dim + 4 * (tt * spec.groups_per_token + g))[0]
                     for g in range(spec.groups_per_token)]
            keys.append([decode(raw[base + _value_byte(spec.layout, tt, d, spec.head_dim)])
                         * scale[d // spec.quant_block_size] for d in range(spec.head_dim)])
        for n in range(next_n):
            row, seen = [], ctx - next_n + n + 1
            for t in range(max_len):
                if t >= seen:
                    row.append(float("-inf"))
                    continue
                row.append(sum(w * max(0.0, sum(a * c for a, c in zip(qh, keys[t])))
                               for w, qh in zip(weights[b * next_n + n], q[b][n])))
            out.append(row)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("layout", [Layout.SHUFFLE, Layout.LINEAR])
@pytest.mark.parametrize("fmt", [FP8Format.E4M3FN, FP8Format.E4M3FNUZ])
def test_reference_reader_matches_a_loop_over_the_bytes(layout, fmt):
    spec = CacheSpec(num_blocks=6, block_size=16, head_dim=32, quant_block_size=16, fp8=fmt, layout=layout)
    g = torch.Generator().manual_seed(5)
    k = (torch.randn(96, 32, generator=g) * torch.exp2(torch.randint(-3, 4, (96, 1), generator=g))).to(torch.bfloat16)
    buffer = producers.run(producers.resolve("reference"), spec, Inputs(k, torch.arange(96), "test"), CPU)
    tables = [[4, 0, 5, 2, 1, 3], [1, 3, 0, 2, 5, 4]]  # two sequences over the same blocks, in other orders
    lens, next_n, heads = [90, 37], 2, 3
    q_codes = fp8.encode(torch.randn(2, next_n, heads, 32, generator=g), fmt)
    weights = torch.rand(2 * next_n, heads, generator=g)
    got = make_reader(spec)(q_codes.view(fmt.torch_dtype()), buffer.cache.view(6, 16, 1, spec.row_bytes), weights,
                            torch.tensor(lens, dtype=torch.int32), torch.tensor(tables, dtype=torch.int32), 96)
    q = q_codes.view(fmt.torch_dtype()).float().tolist()
    expected = _loop_logits(spec, bytes(buffer.flat.reshape(-1).tolist()), q, weights.double().tolist(), lens, tables,
                            next_n, 96)
    assert got.dtype == torch.float64 and got.shape == (4, 96)
    assert torch.equal(torch.isinf(got), torch.isinf(expected))
    assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12)


# ---- the sweep: writers, readers, faults ----------------------------------------------------------------


def test_linear_reader_on_a_shuffle_cache_is_reported_as_a_reader_fault(capsys, tmp_path):
    out_json = tmp_path / "parity.json"
    code, out, err = run(capsys, "parity", *SMALL, "--reader", reader_plugin(), "--json", str(out_json))
    assert code == 1, err
    assert "READER FAULT" in out and "shuffle layout" in out
    payload = json.loads(out_json.read_text())
    assert payload["reader_fault"] is True and payload["passed"] is False
    check = {r["ctx"]: r for r in payload["reader_check"]}
    assert check[200]["recall"] < 1.0 and check[64]["recall"] < 1.0 and check[20]["vacuous"]
    # the writers are fine (both references write the same bytes on e4m3fn + ue8m0): the collapse is the reader's
    for record in payload["records"]:
        assert record["recall"] == check[record["ctx"]]["recall"]


def test_linear_reader_on_a_linear_cache_agrees_with_the_reference(capsys, tmp_path):
    out_json = tmp_path / "parity.json"
    code, out, err = run(capsys, "parity", *SMALL, "--reader", reader_plugin(), "--layout", "linear",
                         "--next-n", "2", "--json", str(out_json))
    assert code == 0, out + err
    assert "READER FAULT" not in out and "agrees with the reference reader" in out
    payload = json.loads(out_json.read_text())
    for record in payload["records"] + payload["reader_check"]:
        assert record["recall"] == 1.0 and record["bad"] == 0, record  # fp32 math, well inside 1e-3
        assert 0 < record["max_rel"] < 1e-6
        assert record["visible"] == [record["ctx"] - 1, record["ctx"]]
        assert record["n"] == 2 * record["ctx"] - 1


def test_mtp_masking_of_the_reference_reader():
    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=32, quant_block_size=32)
    g = torch.Generator().manual_seed(1)
    buffer = producers.run(producers.resolve("reference"), spec,
                           Inputs(torch.randn(32, 32, generator=g).to(torch.bfloat16), torch.arange(32), "t"), CPU)
    q = fp8.encode(torch.randn(1, 2, 4, 32, generator=g), spec.fp8)
    logits = paged_logits(spec, q, buffer.flat, torch.rand(2, 4, generator=g), torch.tensor([20], dtype=torch.int32),
                          torch.tensor([[0, 1]], dtype=torch.int32), 32)
    finite = torch.isfinite(logits)
    assert finite[0, :19].all() and not finite[0, 19:].any()  # row 0 sees ctx - 2 + 0 + 1 = 19 tokens
    assert finite[1, :20].all() and not finite[1, 20:].any()  # row 1 sees 20


def test_mtp_record_is_vacuous_only_when_every_query_row_is(capsys, tmp_path):
    out_json = tmp_path / "parity.json"
    code, _, err = run(capsys, "parity", "--heads", "4", "--topk", "32", "--ctx", "33,34", "--next-n", "2",
                       "--baseline", "reference", "--writers", "reference", "--json", str(out_json))
    assert code == 0, err
    records = {r["ctx"]: r for r in json.loads(out_json.read_text())["records"]}
    assert records[33]["visible"] == [32, 33] and records[33]["vacuous"] is False
    assert records[34]["visible"] == [33, 34] and records[34]["vacuous"] is False
    code, _, _ = run(capsys, "parity", "--heads", "4", "--topk", "33", "--ctx", "33", "--next-n", "2",
                     "--baseline", "reference", "--writers", "reference", "--json", str(out_json))
    assert json.loads(out_json.read_text())["records"][0]["vacuous"] is True


def test_an_all_vacuous_sweep_says_it_proves_nothing(capsys):
    code, out, _ = run(capsys, "parity", "--ctx", "64,200", "--topk", "200", "--heads", "8", "--writers",
                       "triton-buggy", "--baseline", "reference")
    assert code == 0  # no non-vacuous row fails, as documented; the report says what that is worth
    assert "every row is vacuous (ctx <= K = 200): recall cannot tell these writers apart" in out


def test_shuffled_block_table_gives_the_same_verdicts(capsys, tmp_path):
    out_json = tmp_path / "parity.json"
    code, _, err = run(capsys, "parity", *SMALL, "--slots", "shuffled", "--json", str(out_json))
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    assert "shuffled block table" in payload["inputs"]["source"]
    assert all(r["recall"] == 1.0 and r["max_rel"] == 0.0 and r["bad"] == 0 for r in payload["records"])


# ---- writers from files run isolated, as in compare (--timeout, --memory-limit, --in-process) -----------

SWEEP = ("--heads", "4", "--topk", "32", "--ctx", "20,64,200", "--baseline", "reference")
PID_WRITER = f"file:{HERE / 'plugins' / 'records_pid.py'}:writer"


def hostile(file_and_func: str) -> str:
    file_name, _, func = file_and_func.partition(":")
    return f"file:{HERE / 'hostile' / file_name}:{func}"


def assert_one_line_error(code: int, err: str, fragment: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("fp8check: error: ") and fragment in err, err


def test_a_hanging_writer_is_killed_after_the_parity_timeout(capsys):
    name = hostile("hangs.py:sleeps")
    code, out, err = run(capsys, "parity", *SWEEP, "--writers", name, "--timeout", "0.5")
    assert_one_line_error(code, err, f"producer {name!r} did not finish within the 0.5 s timeout (--timeout)")
    assert out == ""


def test_a_writer_over_the_parity_memory_limit_is_exit_2(capsys):
    name = hostile("memory_hog.py:writer")
    code, _, err = run(capsys, "parity", *SWEEP, "--writers", name, "--memory-limit", "256")
    assert_one_line_error(code, err, f"producer {name!r} exceeded its memory limit of 268,435,456 bytes")


@pytest.mark.parametrize("in_process", [False, True])
def test_a_writer_from_a_file_runs_in_a_child_unless_in_process(capsys, tmp_path, monkeypatch, in_process):
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("FP8CHECK_TEST_PID_FILE", str(pid_file))
    code, _, err = run(capsys, "parity", *SWEEP, "--writers", PID_WRITER, *(["--in-process"] if in_process else []))
    assert code == 0, err  # the reference writer's bytes: full recall
    pids = {int(line) for line in pid_file.read_text().split()}
    if in_process:
        assert pids == {os.getpid()}
    else:
        assert pids and os.getpid() not in pids


# ---- the seed config end to end (small) ---------------------------------------------------------------


def test_seed_config_end_to_end_on_small_contexts(capsys, tmp_path):
    out_json = tmp_path / "seed.json"
    code, out, err = run(capsys, "parity", "--config", str(CONFIG), "--ctx", "64,200", "--topk", "128",
                         "--heads", "8", "--json", str(out_json))
    assert code == 0, out + err  # the buggy writer fails, as the config expects
    assert "vacuous" in out and "triton: PASS" in out and "triton-buggy: FAIL, as expected" in out
    payload = json.loads(out_json.read_text())
    assert payload["config"]["expect_fail"] == ["triton-buggy"] and payload["reader"]["name"] == "reference"
    assert [w["name"] for w in payload["writers"]] == ["triton-buggy", "triton"]
    records = {(r["ctx"], r["writer"]): r for r in payload["records"]}
    assert set(records) == {(64, "triton-buggy"), (64, "triton"), (200, "triton-buggy"), (200, "triton")}
    for record in records.values():
        assert set(record) == {"ctx", "writer", "recall", "positional", "max_rel", "bad", "n", "vacuous", "visible",
                               "tie", "missed"}
    assert records[64, "triton-buggy"]["vacuous"] and records[64, "triton-buggy"]["recall"] == 1.0
    fixed, buggy = records[200, "triton"], records[200, "triton-buggy"]
    assert (fixed["recall"], fixed["positional"], fixed["max_rel"], fixed["bad"], fixed["n"]) == (1.0, 1.0, 0.0, 0, 200)
    assert buggy["recall"] < 0.9 and buggy["bad"] > 150 and not buggy["vacuous"]
    assert {"spec", "inputs", "writers", "reader", "baseline", "verdict", "run"} <= set(payload)
    assert payload["kind"] == "parity" and "versions" in payload["run"]


def test_a_failing_writer_not_expected_to_fail_exits_1(capsys):
    code, out, _ = run(capsys, "parity", "--ctx", "64,200", "--topk", "128", "--heads", "8",
                       "--writers", "triton-buggy", "--baseline", "reference")
    assert code == 1
    assert "triton-buggy: FAIL: lowest recall" in out and "FAIL: top-128 parity of triton-buggy read by reference" in out


def test_min_recall_lowers_the_bar(capsys):
    code, _, _ = run(capsys, "parity", "--ctx", "200", "--topk", "128", "--heads", "8", "--writers", "triton-buggy",
                     "--baseline", "reference", "--min-recall", "0")
    assert code == 0


# ---- inputs ---------------------------------------------------------------------------------------------


def test_input_file_replays_the_generated_sweep(capsys, tmp_path):
    spec = CacheSpec(num_blocks=4)
    config = parity_inputs.ParityConfig(ctx=(64, 200), topk=32)
    made = parity_inputs.generate(spec, config, heads=4, seed=3, shuffled=False)
    path = tmp_path / "in.safetensors"
    save_file({"k": made.k, "q": made.q[0], "weights": made.weights[0]}, str(path))  # [H, D] and [H] forms
    results = []
    for source in (("--seed", "3"), ("--input", str(path))):
        out_json = tmp_path / "out.json"
        code, _, err = run(capsys, "parity", *SMALL[2:], "--ctx", "64,200", *source, "--json", str(out_json))
        assert code == 0, err
        results.append(json.loads(out_json.read_text())["records"])
    assert results[0] == results[1]


@pytest.mark.parametrize("tensors, message", [
    ({"k": torch.zeros(200, 128, dtype=torch.bfloat16), "q": torch.zeros(4, 128, dtype=torch.bfloat16)},
     "has no tensor 'weights'"),
    ({"k": torch.zeros(100, 128, dtype=torch.bfloat16), "q": torch.zeros(4, 128, dtype=torch.bfloat16),
      "weights": torch.zeros(4)}, "'k' must be bf16 [>= 200, 128]"),
    ({"k": torch.zeros(200, 128, dtype=torch.bfloat16), "q": torch.zeros(3, 4, 128, dtype=torch.bfloat16),
      "weights": torch.zeros(4)}, "'q' must be torch.bfloat16 [4, 128] or [1, 4, 128]"),
    ({"k": torch.zeros(200, 128, dtype=torch.bfloat16), "q": torch.zeros(4, 128, dtype=torch.bfloat16),
      "weights": torch.zeros(5)}, "'weights' must be torch.float32 [4] or [1, 4]"),
])
def test_bad_input_files_are_one_line_exit_2(capsys, tmp_path, tensors, message):
    path = tmp_path / "in.safetensors"
    save_file(tensors, str(path))
    code, out, err = run(capsys, "parity", "--ctx", "64,200", "--writers", "reference", "--input", str(path))
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (("--ctx", "64,abc"), "--ctx '64,abc': expected a comma-separated list of integers"),
    (("--ctx", "1", "--next-n", "2"), "--next-n 2: must be >= 1 and <= the smallest --ctx (1)"),
    (("--expect-fail", "nobody"), "--expect-fail nobody: not among the writers"),
    (("--writers", "reference,reference"), "--writers reference,reference: each writer may be named once"),
    (("--reader", "nobody"), "unknown reader 'nobody'"),
    (("--writers", "nobody"), "unknown producer 'nobody'"),
    (("--reader", reader_plugin("raises", "misbehaving.py")), "raised RuntimeError: deliberate failure inside the reader"),
    (("--reader", reader_plugin("wrong_shape", "misbehaving.py")), "expected floating-point [B*next_n, max_model_len]"),
    (("--reader", reader_plugin("not_a_tensor", "misbehaving.py")), "returned list, not a tensor of logits"),
    (("--reader", reader_plugin("wrong_signature", "misbehaving.py")), "must take (q_fp8, kv_cache, weights"),
])
def test_bad_usage_and_broken_readers_are_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, "parity", "--ctx", "64", "--heads", "2", "--writers", "reference", *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_config_errors_name_the_file_and_key(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[parity]\ntopk = 'many'\n")
    code, _, err = run(capsys, "parity", "--config", str(bad))
    assert code == 2 and f"{bad} [parity]: topk must be an integer" in err
    bad.write_text("[parity]\nwriter = 'triton'\n")
    code, _, err = run(capsys, "parity", "--config", str(bad))
    assert code == 2 and "[parity]: unknown key(s) writer" in err


def test_a_reader_cannot_touch_fp8checks_tensors():
    spec = CacheSpec(num_blocks=1, block_size=16, head_dim=32, quant_block_size=32)
    reader = registry.resolve_reader(reader_plugin("scribbles", "misbehaving.py"), spec=spec)
    args = [torch.full((1, 1, 2, 32), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn),
            torch.full((1, 16, 1, 36), 7, dtype=torch.uint8), torch.ones(1, 2),
            torch.tensor([16], dtype=torch.int32), torch.tensor([[0]], dtype=torch.int32)]
    before = [a.clone() for a in args]
    logits = readers.run_reader(reader, *args, 16)
    assert logits.shape == (1, 16)
    assert all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(args, before))


# ---- vLLM source files (enabled once the vllm-file: loader is merged) ------------------------------------


def test_vllm_file_reader_reads_row_major(capsys, tmp_path):
    source = f"vllm-file:{HERE / 'readers' / 'vllm_style_readers.py'}:fp8_paged_mqa_logits_torch"
    code, out, err = run(capsys, "parity", *SMALL, "--reader", source)
    assert code == 1 and "READER FAULT" in out, err  # row-major reader, SHUFFLE cache
    code, out, err = run(capsys, "parity", *SMALL, "--reader", source, "--layout", "linear")
    assert code == 0, out + err


def test_vllm_file_triton_reader_runs_exactly_in_the_interpreter(capsys):
    """The vLLM-style Triton reader (FP8 tl.dot, workspace manager, CU-count helper provided by the loader)
    reads a row-major cache as the reference reader does, and a SHUFFLE cache as a reader fault."""
    source = f"vllm-file:{HERE / 'kernels' / 'rocm_indexer_ops.py'}:rocm_fp8_paged_mqa_logits_triton"
    code, out, err = run(capsys, "parity", *SMALL, "--reader", source, "--layout", "linear")
    assert code == 0 and "agrees with the reference reader" in out, out + err
    code, out, err = run(capsys, "parity", *SMALL, "--reader", source)
    assert code == 1 and "READER FAULT" in out, out + err


# ---- near-ties are not reader faults (readers/metrics.py) ---------------------------------------------------


def test_a_miss_within_tolerance_of_the_kth_logit_is_a_tie():
    truth = torch.tensor([[5.0, 4.0, 3.0, 2.0005, 2.0, 1.0]], dtype=torch.float64)
    swapped = truth.clone()
    swapped[0, 3], swapped[0, 4] = 2.0, 2.0005  # the K-th and the (K+1)-th trade places
    m = compare_logits(swapped, truth, [6], 4)
    assert m.recall == 0.75 and m.missed == 1 and m.tie and not m.lost
    far = truth.clone()
    far[0, 5] = 9.0  # a token far below the K-th selected: a real loss
    m = compare_logits(far, truth, [6], 4)
    assert m.recall == 0.75 and m.missed == 1 and not m.tie and m.lost
    exact = compare_logits(swapped, truth, [6], 4, rtol=0.0, atol=1e-4)  # 0.0005 apart: beyond this tolerance
    assert not exact.tie


def _kth_swapping_reader(spec: CacheSpec, topk: int):
    """The exact reader, but each row's K-th and (K+1)-th largest logits trade places: the near-tie of an fp32
    reader at the K-th position."""
    exact = make_reader(spec)

    def reader(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len):
        logits = exact(q_fp8, kv_cache, weights, context_lens, block_tables, max_model_len)
        order = torch.sort(logits, dim=1, descending=True).indices
        rows = torch.arange(logits.shape[0])
        kth, next_one = order[:, topk - 1], order[:, topk]
        swapped = logits.clone()
        swapped[rows, kth], swapped[rows, next_one] = logits[rows, next_one], logits[rows, kth]
        return swapped

    return reader


@pytest.mark.parametrize("atol, fault", [(10.0, False), (0.0, True)])
def test_reader_check_says_near_tie_or_fault(atol, fault):
    config = parity_inputs.ParityConfig(ctx=(300,), topk=32, rtol=0.0, atol=atol)
    spec = CacheSpec(block_size=1, num_blocks=300)
    inputs = parity_inputs.generate(spec, config, heads=4, seed=2, shuffled=False)
    reader = Reader("kth-swap", "swaps the K-th and (K+1)-th logits", _kth_swapping_reader(spec, 32))
    result = parity.run_parity(spec, config, baseline=producers.resolve("reference"),
                               writers=[producers.resolve("reference")], reader=reader, inputs=inputs, device=CPU)
    assert result.reader_check[0].recall == 31 / 32 and result.reader_check[0].missed == 1
    assert result.reader_fault is fault and result.passed is not fault
    text = " ".join(note.text for note in result.notes())
    if fault:
        assert "READER FAULT" in text and result.reader_ties == []
    else:
        assert result.reader_ties == [(300, 31 / 32, 1)]
        assert "only by near-ties" in text and "Not a reader fault." in text and "READER FAULT" not in text


def test_exact_reader_reads_interleaved_and_a_planar_reader_faults_on_it():
    # FlagGems' and vLLM's next_n > 1 readers read per-token records; fp8check's planar linear_reader plugin on
    # an interleaved cache is the same disagreement the other way round: right at block 1 only
    config = parity_inputs.ParityConfig(ctx=(100, 300), topk=32)
    outcomes = {}
    for block in (1, 64):
        spec = CacheSpec(block_size=block, num_blocks=-(-300 // block), layout=Layout.INTERLEAVED)
        inputs = parity_inputs.generate(spec, config, heads=4, seed=2, shuffled=True)
        for name in ("reference", reader_plugin()):
            reader = registry.resolve_reader(name, spec=spec, isolation=None)
            result = parity.run_parity(spec, config, baseline=producers.resolve("reference"),
                                       writers=[producers.resolve("reference")], reader=reader, inputs=inputs,
                                       device=CPU)
            outcomes[block, name == "reference"] = result.reader_fault or not result.passed
    assert outcomes == {(1, True): False, (1, False): False, (64, True): False, (64, False): True}


@pytest.mark.parametrize("written, reads", [(Layout.SHUFFLE, "linear")])
def test_a_reader_fault_names_the_layout_the_reader_reads(written, reads):
    # linear_reader reads planar row-major whatever was written: on a shuffle cache of block 64 the exact reader
    # agrees with it only when told to read linear (whole blocks: a partly written block read in another order
    # holds poison, whatever reads it)
    config = parity_inputs.ParityConfig(ctx=(128, 320), topk=32)
    spec = CacheSpec(block_size=64, num_blocks=5, layout=written)
    inputs = parity_inputs.generate(spec, config, heads=4, seed=2, shuffled=True)
    result = parity.run_parity(spec, config, baseline=producers.resolve("reference"),
                               writers=[producers.resolve("reference")],
                               reader=registry.resolve_reader(reader_plugin(), spec=spec, isolation=None), inputs=inputs,
                               device=CPU)
    assert result.reader_fault and result.reader_reads == reads
    text = " ".join(note.text for note in result.notes())
    assert f"it reads the cache as {reads} (fp8check's exact reader reading {reads} agrees with it) where" \
           f" {written.value} was written" in text
    assert result.to_json()["reader_reads"] == reads


def test_bare_parity_passes_and_still_shows_the_buggy_column(capsys):
    """`fp8check parity` with no options: the seed's two columns, the uint8 wrapper expected to fail."""
    code, out, err = run(capsys, "parity", "--ctx", "1024,4096", "--heads", "4", "--topk", "512")
    assert code == 0, err
    assert "triton-buggy: FAIL, as expected" in out and "triton: PASS" in out


def test_a_narrow_log_gets_every_column(capsys):
    """Piped into an 80-column CI log, the table wraps into one table per writer rather than cutting columns."""
    import io

    from rich.console import Console

    from fp8check.run.prepare import Request, prepare_parity
    from fp8check.report.parity import render

    request = Request.of("parity", {"ctx": [1024, 4096], "heads": 4, "topk": 512, "device": "cpu"}, where="test")
    result = prepare_parity(request).run_parity()
    for width in (80, 200):
        out = io.StringIO()
        Console(file=out, width=width, color_system=None).print(render(result))
        text = out.getvalue()
        assert max(len(line) for line in text.splitlines()) <= width
        # two writers, each with its max_rel and bad/N columns, and the legend naming both once
        assert text.count("max_rel") == 3 and text.count("bad/N") == 3 and "triton-buggy" in text


def test_a_writer_from_a_file_says_what_ran_as_compare_does(capsys):
    path = HERE / "faults" / "transposed_tile.py"
    name = f"file:{path}:writer"
    code, out, err = run(capsys, "parity", *SWEEP, "--writers", f"reference-vllm,{name}", "--expect-fail", name,
                         "--json", "-")
    assert code == 0, err
    writers = json.loads(out)["writers"]
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert [w["provenance"].get("sha256") for w in writers] == [None, sha]
    code, out, _ = run(capsys, "parity", *SWEEP, "--writers", f"reference-vllm,{name}", "--expect-fail", name)
    assert f"writer: writer from {path}, sha256 {sha}" in " ".join(out.split())
