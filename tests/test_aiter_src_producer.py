"""The `aiter-src:PATH` producer end to end, on a stand-in aiter checkout written for these tests
(tests/aiter_cpu/fake_aiter: aiter's source layout, tensor type and op signature, a kernel in aiter's
style; no aiter code). The real sources run in `make aiter-src-table`."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from conftest import on_cpu
import pytest

from fp8check.hip_cpu import compiler as compilers
from fp8check.cli import main

FAKE = Path(__file__).parent / "aiter_cpu" / "fake_aiter"
pytestmark = pytest.mark.skipif(compilers.find() is None, reason=f"no clang >= 20 ({compilers.INSTALL_HINT})")


@pytest.fixture(autouse=True)
def build_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "aiter-src-cache"))


def run(capsys, *args) -> tuple[int, str, str]:
    try:
        code = main(on_cpu(args))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fp8", ["e4m3fn", "e4m3fnuz"])
@pytest.mark.parametrize("scale_fmt, layout", [("ue8m0", "shuffle"), ("fp32", "linear")])
def test_the_built_op_writes_the_bytes_of_reference(capsys, fp8, scale_fmt, layout):
    code, out, _ = run(capsys, "compare", "--baseline", f"aiter-src:{FAKE}", "--candidate", "reference",
                       "--device", "cpu", "--fp8", fp8, "--scale-fmt", scale_fmt, "--layout", layout,
                       "--inputs", "ue8m0-boundary", "--json", "-")
    assert code == 0
    record = json.loads(out)
    assert record["identical"] is True
    provenance = record["baseline_provenance"]
    assert provenance["arch"] == ("gfx942" if fp8 == "e4m3fnuz" else "gfx950")
    assert provenance["sha256"] == hashlib.sha256((FAKE / "csrc/kernels/cache_kernels.cu").read_bytes()).hexdigest()
    assert provenance["compiler"].startswith("clang ") and "-ffp-contract=off" in provenance["flags"]
    assert provenance["emulated"].startswith("v_max3_f32, v_pk_mul_f32, v_med3_f32, v_cvt_pk_fp8_f32")


def test_a_changed_source_line_is_caught(capsys, tmp_path):
    mutant = tmp_path / "mutant"
    shutil.copytree(FAKE, mutant)
    op = mutant / "csrc" / "kernels" / "cache_kernels.cu"
    op.write_text(op.read_text().replace("exp2f(ceilf(log2f(scale)))", "exp2f(roundf(log2f(scale)))"))
    code, _, _ = run(capsys, "compare", "--baseline", f"aiter-src:{mutant}", "--candidate", "reference",
                     "--device", "cpu", "--quiet")
    assert code == 1


def test_an_op_edited_between_two_runs_in_one_process_is_built_again(capsys, tmp_path):
    # in-process the built library stays loaded: the second run must see the edited text, not the first build
    mutant = tmp_path / "edited"
    shutil.copytree(FAKE, mutant)
    args = ("compare", "--baseline", f"aiter-src:{mutant}", "--candidate", "reference", "--device", "cpu",
            "--in-process", "--quiet")
    assert run(capsys, *args)[0] == 0
    op = mutant / "csrc" / "kernels" / "cache_kernels.cu"
    op.write_text(op.read_text().replace("exp2f(ceilf(log2f(scale)))", "exp2f(roundf(log2f(scale)))"))
    code, out, _ = run(capsys, *args)
    assert (code, out.splitlines()[-1].split(":")[0]) == (1, "DIFFERENT")


def test_reads_of_returned_lanes_refuse_the_result(capsys):
    # qbs 64: odd rows' lanes 4-7 return early and lanes 0-3 read them through row_half_mirror
    code, _, err = run(capsys, "compare", "--baseline", f"aiter-src:{FAKE}", "--candidate", "reference",
                       "--device", "cpu", "--qbs", "64", "--quiet")
    assert code == 2
    assert "from lanes that had already returned (undefined on a GPU): result refused" in err


def test_a_folder_without_the_op_is_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "compare", "--baseline", f"aiter-src:{tmp_path}", "--candidate", "reference",
                       "--device", "cpu")
    assert code == 2
    assert "no csrc/kernels/cache_kernels.cu there" in err and len(err.strip().splitlines()) == 1
