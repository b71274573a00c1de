"""Golden files: record once, replay against a candidate anywhere; damaged or foreign files are one line.

`fp8check record` saves a producer's inputs and cache bytes; `compare --baseline golden:FILE` replays
the recorded k and slot_mapping through the candidate under the recorded spec and diffs the bytes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import run

SPEC_OPTIONS = ("--block", "32", "--num-blocks", "4")  # a small cache: 4 x 32 x (128 + 4) bytes


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("fp8check: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


def record(capsys, path: Path, *options: str, producer: str = "reference") -> Path:
    code, _, err = run(capsys, "record", "--producer", producer, "--out", str(path), *options)
    assert code == 0, err
    return path


@pytest.fixture
def golden(capsys, tmp_path) -> Path:
    return record(capsys, tmp_path / "reference.safetensors", *SPEC_OPTIONS)


# ---- replay -------------------------------------------------------------------------------------


def test_round_trip_replays_identically(capsys, golden, tmp_path):
    path = tmp_path / "result.json"
    code, out, err = run(capsys, "compare", "--baseline", f"golden:{golden}", "--candidate", "reference",
                         "--json", str(path))
    assert code == 0, err
    assert err == ""
    payload = json.loads(path.read_text())
    assert payload["identical"] is True
    assert payload["baseline"] == "reference (golden reference.safetensors)"
    assert payload["baseline_emulated"] is True
    assert payload["inputs"] == "replayed from golden reference.safetensors"
    assert payload["spec"]["block_size"] == 32 and payload["spec"]["num_blocks"] == 4
    assert "IDENTICAL: 0 of 16896 bytes differ in 4 blocks" in " ".join(out.split())  # 4 * 32 * 132


def test_spec_options_that_agree_with_the_file_are_accepted(capsys, golden):
    code, _, err = run(capsys, "compare", "--baseline", f"golden:{golden}", "--candidate", "reference",
                       "--block", "32", "--head-dim", "128", "--fp8", "e4m3fn", "--layout", "shuffle")
    assert code == 0, err


# ---- an independent model of both writers (SPEC.md section 3), for the expected counts -------------


def quantize(k: torch.Tensor, *, divisor: float, reciprocal: bool, ue8m0: bool, qbs: int):
    """(codes uint8 [T, D], scales fp32 [T, D/qbs]) on e4m3fnuz, straight from the SPEC's formulas:
    clamp to +-240 then torch's cast (exact for in-range values), -0.0 -> 0x00 by torch's fnuz cast."""
    x = k.float().view(k.shape[0], -1, qbs)
    s = torch.clamp(x.abs().amax(dim=-1), min=1e-4) / divisor
    if ue8m0:
        s = torch.exp2(torch.ceil(torch.log2(s)))
    y = x * (1.0 / s).unsqueeze(-1) if reciprocal else x / s.unsqueeze(-1)
    codes = y.clamp(-240.0, 240.0).to(torch.float8_e4m3fnuz).view(torch.uint8)
    return codes.view(k.shape[0], -1), s


def expected_counts(k, slot_mapping, *, block_size: int, num_blocks: int, ue8m0: bool, qbs: int = 128):
    """Per block: (differing value bytes, differing scale bytes) between aiter's and vLLM's numerics,
    and the (token, dim) of the first differing value byte of the first differing block (SHUFFLE order)."""
    assert (k.float().abs() < 2.0**-126).sum() == (k.float() == 0).sum()  # no denormals: FTZ cannot matter
    codes_a, s_a = quantize(k, divisor=240.0, reciprocal=True, ue8m0=ue8m0, qbs=qbs)
    codes_v, s_v = quantize(k, divisor=224.0, reciprocal=False, ue8m0=ue8m0, qbs=qbs)
    value_diff = (codes_a != codes_v).sum(dim=1)
    scale_diff = (s_a.contiguous().view(torch.uint8) != s_v.contiguous().view(torch.uint8)).view(k.shape[0], -1).sum(dim=1)
    counts = [[0, 0] for _ in range(num_blocks)]
    first = None
    for i, slot in enumerate(slot_mapping.tolist()):
        block, t = divmod(slot, block_size)
        counts[block][0] += int(value_diff[i])
        counts[block][1] += int(scale_diff[i])
        head_dim = k.shape[1]
        for d in torch.nonzero(codes_a[i] != codes_v[i]).view(-1).tolist():
            offset = (t // 16) * 16 * head_dim + (d // 16) * 256 + (t % 16) * 16 + d % 16
            key = (block, offset)
            if first is None or key < first[0]:
                first = (key, t, d)
    return [tuple(c) for c in counts], (first[1], first[2]) if first else None


@pytest.mark.parametrize("scale_fmt", ["ue8m0", "fp32"])
def test_vllm_numerics_on_fnuz_replayed_against_reference_differ_by_the_expected_counts(capsys, tmp_path, scale_fmt):
    # On the CPU: PyTorch's CUDA kernels divide a tensor by a Python scalar as a multiplication by its
    # reciprocal, which is not the IEEE quotient this model (and the real writers' `/`) computes.
    path = record(capsys, tmp_path / "vllm-fnuz.safetensors", *SPEC_OPTIONS, "--fp8", "e4m3fnuz",
                  "--scale-fmt", scale_fmt, "--device", "cpu", producer="reference-vllm")
    result = tmp_path / "result.json"
    code, out, err = run(capsys, "compare", "--baseline", f"golden:{path}", "--candidate", "reference",
                         "--device", "cpu", "--json", str(result))
    assert code == 1, err
    payload = json.loads(result.read_text())
    tensors = load_file(str(path))
    counts, first = expected_counts(tensors["k"], tensors["slot_mapping"], block_size=32, num_blocks=4,
                                    ue8m0=scale_fmt == "ue8m0")
    assert list(zip(payload["value_diff"], payload["scale_diff"])) == counts
    assert payload["diff_bytes"] == sum(v + s for v, s in counts) > 0
    assert (payload["first_mismatch"]["token"], payload["first_mismatch"]["dim"]) == first
    assert payload["baseline"] == "reference-vllm (golden vllm-fnuz.safetensors)"
    assert "DIFFERENT:" in out


# ---- options that contradict the file, and inputs that cannot be given ------------------------------


@pytest.mark.parametrize("option, value, recorded", [
    ("--block", "64", "block_size 32"),
    ("--head-dim", "64", "head_dim 128"),
    ("--num-blocks", "3", "num_blocks 4"),
    ("--qbs", "64", "quant_block_size 128"),
    ("--fp8", "e4m3fnuz", "fp8 e4m3fn"),
    ("--scale-fmt", "fp32", "scale_fmt ue8m0"),
    ("--layout", "linear", "layout shuffle"),
    ("--layers", "2", "layers 1"),  # a single-layer recording; its spec's JSON leaves layers out
])
def test_spec_option_contradicting_the_file_is_named(capsys, golden, option, value, recorded):
    code, out, err = run(capsys, "compare", "--baseline", f"golden:{golden}", "--candidate", "reference",
                         option, value)
    assert_one_line_error(code, err, f"{option} {value} contradicts {golden}, recorded with {recorded}")
    assert out == ""


@pytest.mark.parametrize("option, value", [("--seed", "0"), ("--slots", "padded"), ("--input", "k.safetensors")])
def test_input_options_cannot_be_combined_with_a_golden_file(capsys, golden, option, value):
    code, _, err = run(capsys, "compare", "--baseline", f"golden:{golden}", "--candidate", "reference", option, value)
    assert_one_line_error(code, err, f"{option} cannot be combined with --baseline golden:", "recorded inputs")


# ---- damaged, truncated, foreign files: one line, exit 2 ---------------------------------------------


def flip_byte(path: Path, tensor: str, index: int) -> None:
    """Flip the low bit of byte `index` of one tensor's data, found through the safetensors header
    (8-byte little-endian header length, JSON header, then the data)."""
    data = bytearray(path.read_bytes())
    header_len = struct.unpack("<Q", data[:8])[0]
    start, end = json.loads(data[8 : 8 + header_len])[tensor]["data_offsets"]
    assert 0 <= index < end - start
    data[8 + header_len + start + index] ^= 0x01
    path.write_bytes(bytes(data))


def compare_against(capsys, path: Path) -> tuple[int, str, str]:
    return run(capsys, "compare", "--baseline", f"golden:{path}", "--candidate", "reference")


@pytest.mark.parametrize("tensor, index", [("kv_cache", 0), ("kv_cache", 16895), ("k", 1000), ("slot_mapping", 8)])
def test_a_flipped_data_byte_fails_the_checksum(capsys, golden, tensor, index):
    flip_byte(golden, tensor, index)
    code, _, err = compare_against(capsys, golden)
    assert_one_line_error(code, err, "checksum mismatch: the file was modified or damaged after recording")


def test_a_truncated_file(capsys, golden):
    golden.write_bytes(golden.read_bytes()[:4000])
    code, _, err = compare_against(capsys, golden)
    assert_one_line_error(code, err, f"{golden}: not a readable safetensors file")


def test_a_foreign_safetensors_file_without_metadata(capsys, tmp_path):
    path = tmp_path / "foreign.safetensors"
    save_file({"k": torch.zeros(4, 128, dtype=torch.bfloat16)}, str(path))
    code, _, err = compare_against(capsys, path)
    assert_one_line_error(code, err, f"{path}: not an fp8check golden file")


def test_a_safetensors_file_of_another_format_version(capsys, tmp_path, golden):
    tensors = load_file(str(golden))
    path = tmp_path / "future.safetensors"
    save_file(tensors, str(path), metadata={"format": "fp8check-golden/99"})
    code, _, err = compare_against(capsys, path)
    assert_one_line_error(code, err, "not an fp8check golden file (metadata format is 'fp8check-golden/99')")


@pytest.mark.parametrize("content", [b"", b"not a safetensors file at all\n", b"\x80\x04\x95pickle-ish"],
                         ids=["empty", "text", "pickle-header"])
def test_garbage_is_not_a_golden_file(capsys, tmp_path, content):
    path = tmp_path / "garbage.safetensors"
    path.write_bytes(content)
    code, _, err = compare_against(capsys, path)
    assert_one_line_error(code, err, f"{path}: not a readable safetensors file")


def test_a_missing_file(capsys, tmp_path):
    code, _, err = compare_against(capsys, tmp_path / "absent.safetensors")
    assert_one_line_error(code, err, "absent.safetensors: no such file")


def test_golden_without_a_file_name(capsys):
    code, _, err = run(capsys, "compare", "--baseline", "golden:", "--candidate", "reference")
    assert_one_line_error(code, err, "--baseline golden:FILE needs a file")


def test_a_recorded_spec_that_does_not_fit_the_recorded_bytes(capsys, tmp_path, golden):
    from safetensors import safe_open

    with safe_open(str(golden), framework="pt") as f:
        metadata = dict(f.metadata())
    spec = json.loads(metadata["spec"])
    metadata["spec"] = json.dumps({**spec, "block_size": 64, "num_blocks": 2})  # same bytes, other shape
    path = tmp_path / "edited.safetensors"
    save_file(load_file(str(golden)), str(path), metadata=metadata)
    code, _, err = compare_against(capsys, path)
    assert_one_line_error(code, err, "kv_cache is torch.uint8 [4, 4224], spec needs uint8 [2, 8448]")


@pytest.mark.parametrize("field, value", [("layout", "linear"), ("fp8", "e4m3fnuz"), ("scale_fmt", "fp32")])
def test_an_edited_spec_that_keeps_the_shapes_fails_the_checksum(capsys, tmp_path, golden, field, value):
    # The bytes only mean something under their spec: the checksum covers the spec metadata too.
    from safetensors import safe_open

    with safe_open(str(golden), framework="pt") as f:
        metadata = dict(f.metadata())
    metadata["spec"] = json.dumps({**json.loads(metadata["spec"]), field: value})
    path = tmp_path / "edited.safetensors"
    save_file(load_file(str(golden)), str(path), metadata=metadata)
    code, _, err = compare_against(capsys, path)
    assert_one_line_error(code, err, "checksum mismatch")


@pytest.mark.parametrize("producer, shown", [
    ("triton", None),  # built in: no code from a file, though the golden file keeps how its grid ran
    (f"file:{Path(__file__).parent / 'plugins' / 'corrupt_one_byte.py'}:writer", "recorded by writer from "),
])
def test_a_golden_baseline_names_the_code_that_recorded_it(capsys, tmp_path, producer, shown):
    golden = record(capsys, tmp_path / "g.safetensors", *SPEC_OPTIONS, producer=producer)
    page = tmp_path / "r.html"
    _, out, err = run(capsys, "compare", "--baseline", f"golden:{golden}", "--candidate", "reference",
                      "--html", str(page))
    lines = [line for line in out.splitlines() if line.startswith("baseline:")]
    assert [line.startswith(f"baseline: {shown}") for line in lines] == ([] if shown is None else [True]), lines
    assert "{'" not in page.read_text()  # nested provenance flattened, never a Python dict on the page


def test_an_edited_producer_provenance_fails_the_checksum(capsys, tmp_path):
    from safetensors import safe_open

    writer = Path(__file__).parent / "plugins" / "corrupt_one_byte.py"
    golden = record(capsys, tmp_path / "file.safetensors", *SPEC_OPTIONS, producer=f"file:{writer}:writer")
    with safe_open(str(golden), framework="pt") as f:
        metadata = dict(f.metadata())
    provenance = json.loads(metadata["producer_provenance"])
    metadata["producer_provenance"] = json.dumps({**provenance, "function": "another"}, sort_keys=True)
    path = tmp_path / "edited.safetensors"
    save_file(load_file(str(golden)), str(path), metadata=metadata)
    code, _, err = compare_against(capsys, path)
    assert_one_line_error(code, err, "checksum mismatch")
