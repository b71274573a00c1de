"""The command line: exit codes, one-line errors, --json, record and --input replay."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from fp8check.core import reference
from fp8check.core.cache import CacheBuffer
from fp8check.core.spec import CacheSpec
from conftest import run

PLUGINS = Path(__file__).parent / "plugins"
# The two PyTorch emulations, named explicitly where a test is about more than the defaults.
REFERENCES = ("--baseline", "reference", "--candidate", "reference-vllm")
BASELINE = ("--baseline", "reference")


def plugin(file_name: str, func: str = "writer") -> str:
    return f"file:{PLUGINS / file_name}:{func}"


SMALL = ("--block", "16", "--head-dim", "64", "--num-blocks", "2")


# ---- exit codes of compare ---------------------------------------------------------------------


def test_default_compare_is_identical_exit_0(capsys):
    code, out, err = run(capsys, "compare")
    assert code == 0, err
    assert "IDENTICAL: 0 of 25344 bytes differ in 3 blocks" in out  # 3 * 64 * (128 + 4)
    assert err == ""
    # built-in writers came from no file: no `candidate: ? from ?` line, though the JSON says how grids ran
    assert not [line for line in out.splitlines() if line.startswith(("baseline:", "candidate:"))]


def test_default_compare_on_fnuz_differs_exit_1(capsys):
    code, out, err = run(capsys, "compare", "--fp8", "e4m3fnuz")
    assert code == 1, err
    assert "DIFFERENT:" in out and "first mismatch: block 0" in out
    assert err == ""


@pytest.mark.parametrize("fp8, expected", [("e4m3fn", 0), ("e4m3fnuz", 1)])
def test_reference_profiles_compare(capsys, fp8, expected):
    code, _, err = run(capsys, "compare", *REFERENCES, "--fp8", fp8)
    assert code == expected, err


def test_json_output(capsys, tmp_path):
    path = tmp_path / "result.json"
    code, _, _ = run(capsys, "compare", *REFERENCES, *SMALL, "--json", str(path))
    assert code == 0
    payload = json.loads(path.read_text())
    assert payload["spec"] == CacheSpec(num_blocks=2, block_size=16, head_dim=64, quant_block_size=64).to_dict()
    assert (payload["baseline"], payload["candidate"]) == ("reference", "reference-vllm")
    # 16 tokens * 64 dims value bytes, 16 tokens * 1 group * 4 scale bytes
    assert payload["schema_version"] == 2 and payload["kind"] == "compare"
    assert (payload["value_diff"], payload["scale_diff"]) == ([0, 0], [0, 0])  # one entry per block
    assert (payload["value_total"], payload["scale_total"]) == (1024, 64)  # bytes of one block
    assert payload["identical"] is True
    assert payload["first_mismatch"] is None
    assert payload["run"]["versions"]["torch"] == torch.__version__  # run-dependent data under `run`
    assert payload["run"]["versions"]["triton"] == metadata.version("triton")
    assert set(payload["run"]["timings_s"]) == {"baseline", "candidate", "diff"}
    assert "versions" not in payload and "timings_s" not in payload


def test_json_output_of_a_difference(capsys, tmp_path):
    path = tmp_path / "result.json"
    code, _, _ = run(capsys, "compare", *REFERENCES, "--fp8", "e4m3fnuz", "--json", str(path))
    assert code == 1
    payload = json.loads(path.read_text())
    assert payload["identical"] is False
    assert payload["spec"]["fp8"] == "e4m3fnuz"
    assert len(payload["value_diff"]) == len(payload["scale_diff"]) == 3
    assert all(v > 0 for v in payload["value_diff"]) and (payload["value_total"], payload["scale_total"]) == (8192, 256)
    assert payload["diff_bytes"] == sum(payload["value_diff"]) + sum(payload["scale_diff"])
    first = payload["first_mismatch"]
    assert first["block"] == 0 and first["fp8"] == "e4m3fnuz" and first["region"] in ("value", "scale")
    assert first["baseline_byte"] != first["candidate_byte"]


def test_plugin_corrupting_one_byte_is_found_at_its_coordinate(capsys, tmp_path):
    path = tmp_path / "result.json"
    code, out, err = run(
        capsys, "compare", *BASELINE, "--candidate", plugin("corrupt_one_byte.py"), "--json", str(path)
    )
    assert code == 1, err
    payload = json.loads(path.read_text())
    assert payload["diff_bytes"] == 1
    assert (payload["value_diff"], payload["scale_diff"]) == ([0, 1, 0], [0, 0, 0])
    first = payload["first_mismatch"]
    # byte 667 of a 64 x 128 shuffle block: 667 = 0*2048 + 2*256 + 9*16 + 11 -> token 9, dim 2*16 + 11 = 43
    assert (first["block"], first["region"], first["token"], first["dim"], first["byte_in_block"]) == (
        1, "value", 9, 43, 667,
    )
    baseline, candidate = int(first["baseline_byte"], 16), int(first["candidate_byte"], 16)
    assert candidate == baseline ^ 0x01
    decode = lambda byte: torch.tensor([byte], dtype=torch.uint8).view(torch.float8_e4m3fn).item()  # noqa: E731
    assert (first["baseline_value"], first["candidate_value"]) == (decode(baseline), decode(candidate))
    assert "first mismatch: block 1, token 9, dim 43 (value region, byte 667)" in out


# ---- exit 2: one line on stderr, no traceback ----------------------------------------------------


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fp8check: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


def test_bad_spec(capsys):
    code, out, err = run(capsys, "compare", "--block", "15")
    assert_one_line_error(code, err, "block_size", "15")
    assert out == ""


def test_bad_qbs(capsys):
    code, _, err = run(capsys, "compare", "--qbs", "48")
    assert_one_line_error(code, err, "quant_block_size 48")


def test_missing_input_file(capsys, tmp_path):
    missing = tmp_path / "nope.safetensors"
    code, _, err = run(capsys, "compare", "--input", str(missing))
    assert_one_line_error(code, err, str(missing), "no such file")


def test_plugin_that_fails_to_import(capsys):
    code, _, err = run(capsys, "compare", *BASELINE, "--candidate", plugin("fails_to_import.py"))
    assert_one_line_error(code, err, "failed to import", "ImportError: this plugin is deliberately broken")


@pytest.mark.parametrize("func, has", [("writer", "has writer(k, kv_cache)"),
                                       ("unreadable", "has no signature Python can read")])
def test_plugin_with_wrong_signature(capsys, func, has):
    code, _, err = run(capsys, "compare", *BASELINE, "--candidate", plugin("wrong_signature.py", func))
    assert_one_line_error(code, err, "must take (k, kv_cache, slot_mapping, quant_block_size, scale_fmt)", has)


def test_plugin_without_the_function(capsys):
    code, _, err = run(capsys, "compare", *BASELINE, "--candidate", plugin("wrong_signature.py", "missing"))
    assert_one_line_error(code, err, "has no function 'missing'")


def test_plugin_that_raises(capsys):
    code, _, err = run(capsys, "compare", *BASELINE, "--candidate", plugin("raises.py"))
    assert_one_line_error(code, err, "raised RuntimeError: deliberate failure inside the writer")


def test_unknown_producer(capsys):
    code, _, err = run(capsys, "compare", "--baseline", "no-such-writer")
    assert_one_line_error(code, err, "unknown producer 'no-such-writer'", "reference")


def test_bad_fp8_choice(capsys):
    code, _, err = run(capsys, "compare", "--fp8", "e5m2")
    assert_one_line_error(code, err, "--fp8", "e5m2")


def test_debug_shows_the_traceback(capsys):
    code, _, err = run(capsys, "compare", *BASELINE, "--candidate", plugin("raises.py"), "--debug")
    assert code == 2
    assert "Traceback" in err
    assert "deliberate failure inside the writer" in err
    assert err.strip().splitlines()[-1].startswith("fp8check: error: ")


# ---- record and --input replay -------------------------------------------------------------------


def test_record_writes_a_golden_safetensors_file(capsys, tmp_path):
    out_path = tmp_path / "golden.safetensors"
    code, out, err = run(capsys, "record", *SMALL, "--producer", "reference", "--seed", "3", "--out", str(out_path))
    assert code == 0, err
    assert str(out_path) in out
    tensors = load_file(str(out_path))
    assert set(tensors) == {"k", "slot_mapping", "kv_cache", "guards"}
    k, slot_mapping, kv_cache = tensors["k"], tensors["slot_mapping"], tensors["kv_cache"]
    assert k.dtype == torch.bfloat16 and tuple(k.shape) == (32, 64)
    assert slot_mapping.dtype == torch.int64 and slot_mapping.tolist() == list(range(32))
    # qbs defaults to head_dim 64: one group, 16 * (64 + 4 * 1) = 1088 bytes per block
    assert kv_cache.dtype == torch.uint8 and tuple(kv_cache.shape) == (2, 1088)
    with safe_open(str(out_path), framework="pt") as f:
        meta = f.metadata()
    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=64, quant_block_size=64)
    assert json.loads(meta["spec"]) == spec.to_dict()
    assert meta["producer"] == "reference"
    assert meta["torch"] == torch.__version__
    assert meta["triton"] == metadata.version("triton")
    # the recorded bytes are what the reference writer puts in a fresh cache for the recorded k
    buffer = CacheBuffer.allocate(spec, "cpu")
    reference.aiter_writer(k, buffer.cache, slot_mapping, 64, "ue8m0")
    assert torch.equal(kv_cache, buffer.flat)
    assert torch.equal(tensors["guards"], buffer.guards)  # the guard zones as the producer left them


def write_k_only(path: Path, num_tokens: int, head_dim: int) -> torch.Tensor:
    k = (torch.randn(num_tokens, head_dim, generator=torch.Generator().manual_seed(9)) * 3).to(torch.bfloat16)
    save_file({"k": k}, str(path))
    return k


def test_input_without_slot_mapping_replays_sequentially(capsys, tmp_path):
    k_path, golden = tmp_path / "k.safetensors", tmp_path / "golden.safetensors"
    k = write_k_only(k_path, 40, 64)
    code, _, err = run(
        capsys, "record", "--producer", "reference", "--block", "16", "--head-dim", "64", "--input", str(k_path),
        "--out", str(golden),
    )
    assert code == 0, err
    tensors = load_file(str(golden))
    assert torch.equal(tensors["k"], k)
    assert tensors["slot_mapping"].tolist() == list(range(40))
    # slots 0..39 need 40 // 16 + 1 = 3 blocks of 16 * (64 + 4) = 1088 bytes
    assert tuple(tensors["kv_cache"].shape) == (3, 1088)
    spec = CacheSpec(num_blocks=3, block_size=16, head_dim=64, quant_block_size=64)
    buffer = CacheBuffer.allocate(spec, "cpu")
    reference.aiter_writer(k, buffer.cache, torch.arange(40), 64, "ue8m0")
    assert torch.equal(tensors["kv_cache"], buffer.flat)


def test_compare_replays_an_input_file(capsys, tmp_path):
    k_path, result = tmp_path / "k.safetensors", tmp_path / "result.json"
    write_k_only(k_path, 40, 64)
    code, _, err = run(
        capsys, "compare", *REFERENCES, "--block", "16", "--head-dim", "64", "--input", str(k_path),
        "--json", str(result),
    )
    assert code == 0, err
    payload = json.loads(result.read_text())
    assert payload["inputs"] == "replayed from k.safetensors"
    assert payload["spec"]["num_blocks"] == 3
    assert payload["identical"] is True


def test_input_with_wrong_head_dim(capsys, tmp_path):
    k_path = tmp_path / "k.safetensors"
    write_k_only(k_path, 8, 32)
    code, _, err = run(capsys, "compare", "--input", str(k_path))
    assert_one_line_error(code, err, "head_dim 32", "--head-dim is 128")


def test_input_that_is_not_safetensors(capsys, tmp_path):
    path = tmp_path / "garbage.safetensors"
    path.write_bytes(b"not a safetensors file at all")
    code, _, err = run(capsys, "compare", "--input", str(path))
    assert_one_line_error(code, err, str(path), "not a readable safetensors file")


@pytest.mark.parametrize("argv", [["--help"], ["compare", "--help"], ["record", "--help"]])
def test_help_exits_0(capsys, argv):
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert "Usage:" in out


# ---- --help ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--help"], ["--version"], *([name, "--help"] for name in
                                  ("compare", "record", "table", "gate", "parity", "doctor"))])
def test_help_does_not_import_torch(argv):
    """`fp8check --help` answers in a fraction of a second: torch (seconds to import) loads only when a
    command runs."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    script = f"import sys; from fp8check.cli import main; code = main({argv!r}); print(code, 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 False", done.stdout


@pytest.mark.parametrize("candidate, caption, hidden", [
    ("reference-vllm", "the first 16 blocks (--all-blocks: all)", "4 more blocks, 0 differ"),
    ("triton-buggy", "the first 8 and the 8 worst differing blocks (--all-blocks: all)", "7 more blocks, 7 differ"),
])
def test_the_block_tables_caption_says_which_blocks_it_shows(capsys, candidate, caption, hidden):
    code, out, err = run(capsys, "compare", "--baseline", "reference", "--candidate", candidate,
                         "--block", "16", "--head-dim", "64", "--num-blocks", "20")
    assert code == (0 if candidate == "reference-vllm" else 1), err
    assert caption in out and hidden in out  # triton-buggy: its first 8 and its 8 worst are 13 blocks


def test_version_is_the_packages_own():
    import fp8check

    code, out, _ = run_version()  # from a source checkout too: the version is not read from metadata
    assert code == 0 and out.strip() == f"fp8check, version {fp8check.__version__}"


def test_the_installed_version_is_the_one_in_the_source():
    import fp8check

    try:
        installed = metadata.version("fp8check")
    except metadata.PackageNotFoundError:
        pytest.skip("fp8check runs from a source checkout here, not installed")
    assert installed == fp8check.__version__


def run_version():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "fp8check", "--version"], capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_the_interpreters_floating_point_warnings_never_reach_stderr():
    # NaN and inf inputs make numpy warn inside interpreted kernels (0/0, inf/inf): the kernel's own
    # arithmetic, not the checker's to print; a fresh process, since Python shows a warning once per place
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "fp8check", "compare", "--inputs", "specials", "--specials-inf-nan",
                           "--device", "cpu", "--quiet"], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)
    assert (done.returncode, done.stderr) == (1, ""), done.stderr
    assert done.stdout.startswith("DIFFERENT: ")


def test_records_json_gives_the_spec_as_compare_does(capsys, tmp_path):
    code, out, err = run(capsys, "record", *SMALL, "--producer", "reference", "--out", str(tmp_path / "g.safetensors"),
                         "--json", "-")
    assert code == 0, err
    assert json.loads(out)["spec"] == CacheSpec(num_blocks=2, block_size=16, head_dim=64, quant_block_size=64).to_dict()
