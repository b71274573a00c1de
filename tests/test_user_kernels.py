"""The user's own kernel, unmodified: vLLM-style files without vLLM, exact CPU runs, two git revisions.

The kernels are tests/kernels/rocm_indexer_ops.py, written for these tests in vLLM's style (vLLM's
import block, module-level platform code, one Triton program per token). The pre-fix wrapper is that
file with its one-line fix removed, as the seed's fix commit did.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import run
import pytest
import torch

from fp8check.core.spec import CacheSpec, FP8Format, Layout, ScaleFormat
from fp8check.triton_cpu import interpreter, known_answers
from fp8check.code.load import load_function, prepare_to_run

KERNELS = Path(__file__).parent / "kernels"
OPS = KERNELS / "rocm_indexer_ops.py"
WRITER = f"vllm-file:{OPS}"
FIX = ".view(FP8_DTYPE)\n"
SMALL = ("--num-blocks", "2")
NEXT_N = 2



def run_json(capsys, tmp_path: Path, *argv: str) -> tuple[int, dict, str]:
    path = tmp_path / "result.json"
    code, out, err = run(capsys, *argv, "--json", str(path))
    return code, json.loads(path.read_text()) if path.exists() else {}, out + err


def prefix_source() -> str:
    """The pre-fix wrapper: the same file with `.view(FP8_DTYPE)` removed from the value slice."""
    text = OPS.read_text()
    assert text.count(FIX) == 1
    return text.replace(FIX, "\n")


SHIM = '''import logging

import triton
import triton.language as tl


class _Platform:  # stands in for vllm.platforms.current_platform on this machine
    def fp8_dtype(self):
        return torch.DTYPE

    def is_rocm(self):
        return ROCM


current_platform = _Platform()
init_logger = logging.getLogger
'''


def shimmed_source(fmt: FP8Format = FP8Format.E4M3FN) -> str:
    """The same file with vLLM's imports replaced by a small shim for one FP8 format, as a user without
    vLLM would write it."""
    text = re.sub(r"^(import vllm|from vllm)[^\n]*\n", "", OPS.read_text(), flags=re.M)
    text = re.sub(r"^if current_platform\.is_rocm\(\):\n    [^\n]*\n", "", text, flags=re.M)
    shim = SHIM.replace("DTYPE", str(fmt.torch_dtype()).removeprefix("torch.")).replace(
        "ROCM", str(fmt is FP8Format.E4M3FNUZ))
    return text.replace("logger = init_logger", shim + "\n\nlogger = init_logger", 1)


# ---- the correct wrapper is IDENTICAL on the CPU ---------------------------------------------------


# (baseline, --fp8, --scale-fmt): the Done-when matrix of issue 9
PROFILES = [("reference", "e4m3fn", "ue8m0"), ("reference-vllm", "e4m3fn", "fp32"),
            ("reference-vllm", "e4m3fnuz", "ue8m0"), ("reference-vllm", "e4m3fnuz", "fp32")]


def writer_target(variant: str, fp8: str, tmp_path: Path) -> str:
    """The same wrapper with vLLM's real import block (vllm-file:) or with a shim instead (file:)."""
    if variant == "vllm-imports":
        return WRITER
    path = tmp_path / "writer.py"
    path.write_text(shimmed_source(FP8Format(fp8)))
    return f"file:{path}:indexer_k_quant_and_cache_triton"


@pytest.mark.parametrize("slots", ["sequential", "shuffled", "padded"])
@pytest.mark.parametrize("block", ["64", "16", "1"])
@pytest.mark.parametrize("baseline, fp8, scale_fmt", PROFILES)
@pytest.mark.parametrize("variant", ["vllm-imports", "shimmed"])
def test_correct_wrapper_is_identical_on_the_cpu(capsys, tmp_path, variant, baseline, fp8, scale_fmt, block, slots):
    ok, reason = known_answers.check(FP8Format(fp8))
    if not ok:
        pytest.skip(f"this Triton's interpreter cannot convert to {fp8}: {reason}")
    code, out, err = run(capsys, "compare", "--baseline", baseline, "--candidate", writer_target(variant, fp8, tmp_path),
                         "--fp8", fp8, "--scale-fmt", scale_fmt, "--block", block, "--slots", slots,
                         "--num-blocks", "1" if block == "64" else "3")  # ~2.4-8 ms per token: keep block 64 to one
    assert code == 0, out + err
    assert "IDENTICAL" in out


def test_no_environment_variable_needed(tmp_path):
    """A fresh process, TRITON_INTERPRET unset: kernels on CPU tensors run in the exact interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    done = subprocess.run([sys.executable, "-m", "fp8check", "compare", "--baseline", "reference",
                           "--candidate", WRITER, "--block", "16", *SMALL], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "IDENTICAL: 0 of 4224 bytes differ in 2 blocks" in done.stdout  # 2 * 16 * (128 + 4)


def test_triton_imported_first_changes_nothing():
    """Triton imported (and a kernel decorated) before fp8check runs: the CPU run is the same."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    script = ("import sys, triton; from fp8check.cli import main; "
              f"sys.exit(main(['compare', '--baseline', 'reference', '--candidate', {WRITER!r}, '--block', '16',"
              f" {', '.join(map(repr, SMALL))}, '--in-process']))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "IDENTICAL: 0 of 4224 bytes differ in 2 blocks" in done.stdout


# ---- the pre-fix wrapper: ~99% of value bytes, integer-cast ------------------------------------------


def test_prefix_wrapper_differs_in_99_percent_of_value_bytes_diagnosed_integer_cast(capsys, tmp_path):
    path = tmp_path / "rocm_indexer_ops.py"
    path.write_text(prefix_source())
    code, payload, text = run_json(capsys, tmp_path, "compare", "--baseline", "reference",
                                   "--candidate", f"vllm-file:{path}", "--num-blocks", "3")
    assert code == 1, text
    assert payload["scale_diff"] == [0, 0, 0]
    assert all(0.98 < v / payload["value_total"] < 1.0 for v in payload["value_diff"])
    assert [cause["category"] for cause in payload["diagnosis"]] == ["integer-cast"]


# ---- one-line errors ---------------------------------------------------------------------------------


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_missing_function_is_one_line(capsys):
    code, _, err = run(capsys, "compare", "--candidate", f"{WRITER}:no_such_writer")
    assert one_line(code, err) == (f"fp8check: error: producer '{WRITER}:no_such_writer': {OPS} has no top-level"
                                   " function 'no_such_writer'")


def test_unresolvable_name_is_one_line_naming_file_function_and_name(capsys, tmp_path):
    path = tmp_path / "ops.py"
    path.write_text(OPS.read_text().replace("fmt_max = 224.0", "fmt_max = _arch_fp8_max()\n    fmt_max = 224.0"))
    code, _, err = run(capsys, "compare", "--candidate", f"vllm-file:{path}")
    assert one_line(code, err) == (
        f"fp8check: error: producer 'vllm-file:{path}': {path}: indexer_k_quant_and_cache_triton needs"
        " '_arch_fp8_max', which the vllm-file loader cannot provide"
    )


def test_name_imported_from_vllm_is_named_with_its_module(capsys):
    code, _, err = run(capsys, "compare", "--candidate", f"{WRITER}:unrelated_module_code_needing_vllm")
    assert "needs 'breakable_cudagraph' (imported from vllm.compilation.breakable_cudagraph)" in one_line(code, err)


def test_unknown_platform_method_is_refused(tmp_path):
    path = tmp_path / "ops.py"
    path.write_text("from vllm.platforms import current_platform\n\n\n"
                    "def writer(k, kv_cache, slot_mapping, qbs, scale_fmt):\n    return current_platform.is_tpu()\n")
    with pytest.raises(Exception, match=r"needs 'current_platform.is_tpu'"):
        load_function(f"vllm-file:{path}:writer")


# ---- what the loader executes and binds --------------------------------------------------------------


def test_unrelated_module_code_is_never_executed(tmp_path):
    path = tmp_path / "ops.py"
    path.write_text(
        "import vllm.envs as envs\nfrom vllm.platforms import current_platform\n"
        "raise RuntimeError('module-level code ran')\n"
        "FP8_DTYPE = current_platform.fp8_dtype()\n_SCALE = 2\n\n\n"
        "def probe(x):\n    return (FP8_DTYPE, current_platform.is_rocm(), x * _SCALE)\n"
    )
    for fmt, rocm in ((FP8Format.E4M3FN, False), (FP8Format.E4M3FNUZ, True)):
        loaded = load_function(f"vllm-file:{path}:probe", role="reader", fp8=fmt)
        assert loaded.fn(21) == (fmt.torch_dtype(), rocm, 42)
        assert loaded.provenance["bound"]["FP8_DTYPE"] == f"{fmt.torch_dtype()} from --fp8"
        assert loaded.provenance["executed"] == ["_SCALE", "probe"]


def test_a_definition_needing_vllm_is_replaced_by_its_stand_in_with_what_it_pulled_in(tmp_path):
    path = tmp_path / "ops.py"
    path.write_text(
        "from vllm.utils.platform_utils import num_compute_units\n\n_UNITS = 4\n\n\n"
        "def _helper():\n    return _UNITS\n\n\n"
        "def _decode_cu_count():\n    return num_compute_units() + _helper()\n\n\n"
        "def reader():\n    return _decode_cu_count(), _UNITS\n"
    )
    loaded = load_function(f"vllm-file:{path}:reader", role="reader", device=torch.device("cpu"))
    assert loaded.fn() == (256, 4)  # vLLM's own CPU fallback count
    assert loaded.provenance["executed"] == ["_UNITS", "reader"]  # _helper came only with the replaced one
    assert list(loaded.provenance["bound"]) == ["_decode_cu_count"]


def test_writer_follows_each_runs_fp8(capsys, tmp_path):
    code, payload, text = run_json(capsys, tmp_path, "compare", "--baseline", "reference-vllm", "--candidate", WRITER,
                                   "--fp8", "e4m3fnuz", "--block", "1", *SMALL)
    assert code == 0, text
    provenance = payload["candidate_provenance"]
    assert provenance["bound"]["FP8_DTYPE"] == "torch.float8_e4m3fnuz from --fp8"
    assert (provenance["loader"], provenance["file"], provenance["function"]) == (
        "vllm-file", str(OPS), "indexer_k_quant_and_cache_triton")
    assert provenance["sha256"] == __import__("hashlib").sha256(OPS.read_bytes()).hexdigest()


def reader_inputs(block_size: int, fp8: FP8Format):
    """A LINEAR cache written by the reference writer, one query, and the float64 truth of its logits."""
    from fp8check.core import inputs as inputs_mod
    from fp8check.producers.registry import resolve, run as run_writer

    spec = CacheSpec(num_blocks=4, block_size=block_size, head_dim=64, quant_block_size=64, fp8=fp8,
                     scale_fmt=ScaleFormat.FP32, layout=Layout.LINEAR)
    data = inputs_mod.generate(spec, seed=3)
    cache = run_writer(resolve("reference"), spec, data, torch.device("cpu")).cache
    gen = torch.Generator().manual_seed(5)
    batch, next_n, heads, ctx = 1, NEXT_N, 4, spec.num_slots - 3
    q = (torch.randn(batch, next_n, heads, 64, generator=gen) * 4).to(fp8.torch_dtype())
    weights = torch.rand(batch * next_n, heads, generator=gen)
    tables = torch.arange(spec.num_blocks, dtype=torch.int32).view(1, -1)
    lens = torch.tensor([ctx], dtype=torch.int32)
    values = cache.view(spec.num_blocks, -1)[:, : block_size * 64].contiguous().view(fp8.torch_dtype())
    scales = cache.view(spec.num_blocks, -1)[:, block_size * 64:].contiguous().view(torch.float32)
    keys = (values.double().view(-1, block_size, 64) * scales.double().view(-1, block_size, 1)).view(-1, 64)
    truth = torch.full((batch * next_n, spec.num_slots), float("-inf"), dtype=torch.float64)
    for n in range(next_n):
        visible = ctx - next_n + n + 1
        truth[n, :visible] = (weights[n].double()[:, None] * torch.relu(q[0, n].double() @ keys[:visible].T)).sum(0)
    return (q, cache, weights, lens, tables, spec.num_slots), truth


@pytest.mark.parametrize("reader", ["fp8_paged_mqa_logits_torch", "rocm_fp8_paged_mqa_logits_triton"])
def test_vllm_style_readers_load_and_run(reader):
    args, truth = reader_inputs(16, FP8Format.E4M3FN)
    loaded = load_function(f"vllm-file:{OPS}:{reader}", role="reader", fp8=FP8Format.E4M3FN,
                           device=torch.device("cpu"))
    prepare_to_run(loaded, FP8Format.E4M3FN, torch.device("cpu"))
    with interpreter.cpu_kernels():
        logits = loaded.fn(*args)
    finite = torch.isfinite(truth)
    assert torch.equal(torch.isfinite(logits), finite)
    assert torch.allclose(logits[finite].double(), truth[finite], rtol=1e-5, atol=1e-5)
    expected = {"fp8_paged_mqa_logits_torch": {"FP8_DTYPE", "cdiv"},
                "rocm_fp8_paged_mqa_logits_triton": {"FP8_DTYPE", "current_platform", "current_workspace_manager",
                                                     "tl", "triton"}}[reader]
    assert set(loaded.provenance["bound"]) == expected


# ---- git:REV:PATH ------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def fix_repo(tmp_path):
    """A repository with two commits of one vLLM-style file: the pre-fix wrapper, then the fix."""
    repo = tmp_path / "repo"
    target = repo / "vllm" / "v1" / "attention" / "ops" / "rocm_aiter_mla_sparse.py"
    target.parent.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "test@example.com")
    git(repo, "config", "user.name", "test")
    target.write_text(prefix_source())
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "writer")
    target.write_text(OPS.read_text())
    git(repo, "commit", "-qam", "fix: view the value region as FP8")
    target.write_text("this working copy is not Python\n")  # git:REV reads commits, never the working tree
    return repo, "vllm/v1/attention/ops/rocm_aiter_mla_sparse.py"


def test_table_over_two_git_revisions_reproduces_the_seed_table(capsys, tmp_path, fix_repo):
    repo, path = fix_repo
    code, payload, text = run_json(capsys, tmp_path, "table", "--repo", str(repo), "--baseline", "reference",
                                   "--buggy", f"vllm-file:git:HEAD~1:{path}", "--fixed", f"vllm-file:git:HEAD:{path}")
    assert code == 0, text
    assert "PASS: the fixed wrapper matches byte for byte" in text
    assert payload["fixed"]["value_diff"] == [0, 0, 0]
    assert all(0.98 < v / payload["value_total"] < 1.0 for v in payload["buggy"]["value_diff"])
    assert [c["category"] for c in payload["buggy"]["diagnosis"]] == ["integer-cast"]
    for side, rev in (("buggy", "HEAD~1"), ("fixed", "HEAD")):
        provenance = payload[side]["candidate_provenance"]
        assert (provenance["revision"], provenance["commit"], provenance["file"]) == (rev, git(repo, "rev-parse", rev),
                                                                                       path)
        blob = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True, check=True).stdout
        assert provenance["sha256"] == __import__("hashlib").sha256(blob).hexdigest()
        assert provenance["commit"] in text.replace("\n", "")


def test_compare_gate_fails_when_the_change_changes_bytes(capsys, tmp_path, fix_repo):
    repo, path = fix_repo
    code, out, err = run(capsys, "compare", "--repo", str(repo), "--baseline", f"vllm-file:git:HEAD:{path}",
                         "--candidate", f"vllm-file:git:HEAD~1:{path}", "--block", "16", *SMALL)
    assert code == 1, out + err
    code, out, err = run(capsys, "compare", "--repo", str(repo), "--baseline", f"vllm-file:git:HEAD:{path}",
                         "--candidate", f"vllm-file:{OPS}", "--block", "16", *SMALL)
    assert code == 0, out + err


def test_file_git_function_and_bad_revision(capsys, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "test@example.com")
    git(repo, "config", "user.name", "test")
    (repo / "shimmed.py").write_text(shimmed_source())
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "shimmed writer")
    target = "file:git:HEAD:shimmed.py:indexer_k_quant_and_cache_triton"
    code, out, err = run(capsys, "compare", "--repo", str(repo), "--baseline", "reference", "--candidate", target,
                         "--block", "16", *SMALL)
    assert code == 0, out + err
    code, _, err = run(capsys, "compare", "--repo", str(repo), "--candidate", "file:git:nope:shimmed.py:writer")
    line = one_line(code, err)
    assert line == (f"fp8check: error: producer 'file:git:nope:shimmed.py:writer': git:nope:shimmed.py: no commit"
                    f" 'nope' in the git repository {git(repo, 'rev-parse', '--show-toplevel')}")


def test_input_and_golden_from_git(capsys, tmp_path, fix_repo):
    repo, _ = fix_repo
    golden_path = repo / "golden.safetensors"
    code, _, err = run(capsys, "record", "--producer", WRITER, "--block", "16", *SMALL, "--slots", "padded",
                       "--out", str(golden_path))
    assert code == 0, err
    from safetensors.torch import load_file, save_file

    recorded = load_file(str(golden_path))  # an --input file holds only k and slot_mapping
    save_file({"k": recorded["k"], "slot_mapping": recorded["slot_mapping"]}, str(repo / "inputs.safetensors"))
    git(repo, "add", "golden.safetensors", "inputs.safetensors")
    git(repo, "commit", "-qm", "golden")
    golden_path.write_bytes(b"damaged after the commit")
    code, payload, text = run_json(capsys, tmp_path, "compare", "--repo", str(repo), "--baseline",
                                   "golden:git:HEAD:golden.safetensors", "--candidate", "reference")
    assert code == 0, text
    assert payload["baseline_provenance"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert payload["baseline_provenance"]["recorded_by"]["function"] == "indexer_k_quant_and_cache_triton"
    code, out, err = run(capsys, "compare", "--repo", str(repo), "--input", "git:HEAD:inputs.safetensors",
                         "--baseline", "reference", "--candidate", WRITER, "--block", "16", *SMALL)
    assert code == 0, out + err
    assert f"inputs.safetensors at git HEAD = {git(repo, 'rev-parse', 'HEAD')}" in out.replace("\n", "")


# ---- what a CPU run says about compiled kernels ------------------------------------------------------


def test_fp32_scales_carry_the_approximate_division_note(capsys, tmp_path):
    code, payload, text = run_json(capsys, tmp_path, "compare", "--baseline", "reference-vllm", "--candidate", WRITER,
                                   "--scale-fmt", "fp32", "--block", "1", *SMALL)
    assert code == 0, text
    assert payload["interpreter_note"] and "approximate" in payload["interpreter_note"]
    assert "note: CPU interpreter run" in text
    code, payload, text = run_json(capsys, tmp_path, "compare", "--baseline", "reference", "--candidate", WRITER,
                                   "--block", "1", *SMALL)
    assert code == 0 and payload["interpreter_note"] is None, text


def test_interpreter_semantics_known_answers_pass_here():
    ok, reason = known_answers.check_semantics()
    assert ok, reason


def test_program_listener_hears_every_program():
    heard = []
    with interpreter.cpu_kernels(), interpreter.program_listener(lambda done, total: heard.append((done, total))):
        known_answers._run_semantics_kernel()
    assert heard == [(1, 2), (2, 2)]


@pytest.fixture
def stock_interpreter_masks(monkeypatch):
    """The interpreter's masked load/store as Triton ships them (fp8check's mask fix taken out)."""
    monkeypatch.setattr(interpreter, "_mask_fix", lambda handle_cls, load, store: (load, store))
    known_answers.check_semantics.cache_clear()
    yield
    known_answers.check_semantics.cache_clear()


@pytest.mark.triton(min="3.9")  # Triton 3.6's stock interpreter takes int32 masks; 3.9's refuses them
def test_semantics_check_refuses_the_stock_interpreters_int1_masks(stock_interpreter_masks):
    ok, reason = known_answers.check_semantics()
    assert not ok
    assert "cannot run the semantics kernel" in reason and "mask has unsupported dtype" in reason


def test_a_files_bound_names_follow_the_runs_device():
    """Loaded for one device (a GPU machine's default), run on another: vLLM's workspace stand-in
    allocates where the run's tensors are."""
    reader = f"vllm-file:{OPS}:rocm_fp8_paged_mqa_logits_triton"
    loaded = load_function(reader, fp8=FP8Format.E4M3FN, device=torch.device("meta"))
    names = loaded.fn.__globals__
    assert names["current_workspace_manager"]().get_simultaneous(((2, 3), torch.float32))[0].device.type == "meta"
    prepare_to_run(loaded, FP8Format.E4M3FN, torch.device("cpu"))
    (workspace,) = names["current_workspace_manager"]().get_simultaneous(((2, 3), torch.float32))
    assert workspace.device.type == "cpu" and workspace.shape == (2, 3)
