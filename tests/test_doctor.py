"""`fp8check doctor`: every producer and why not, versions, device and its FP8 format, Triton exactness."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch
from standins import aiter_standin, install

from fp8check.run import doctor
from fp8check.producers import registry as producers
from fp8check.producers.adapters import aiter, platform
from fp8check.producers.adapters.platform import Backend, Platform, fp8_for_arch
from fp8check.core.spec import FP8Format
from conftest import run

MI355 = Platform(Backend.ROCM, True, "stand-in MI355X", "gfx950:sramecc+:xnack-", "cpu")


pytestmark = pytest.mark.usefixtures("no_real_libraries")  # tests/conftest.py


def doctor_json(capsys, tmp_path, *argv: str) -> tuple[int, dict]:
    path = tmp_path / "doctor.json"
    code, _, err = run(capsys, "doctor", "--json", str(path), *argv)
    assert err == ""
    return code, json.loads(path.read_text())


# ---- the report ---------------------------------------------------------------------------------


def test_doctor_lists_every_producer_with_a_reason_and_exits_0(capsys, tmp_path):
    code, payload = doctor_json(capsys, tmp_path)
    assert code == 0
    rows = {row["name"]: row for row in payload["producers"]}
    assert list(rows) == producers.names()
    assert rows["reference"]["available"] is True
    assert rows["aiter"] == {
        "name": "aiter", "available": False, "description": producers.REGISTRY[producers.Role.WRITER]["aiter"].description,
        "reason": "aiter is not installed (ROCm's kernel library, pip package amd-aiter; needs a ROCm GPU)",
    }
    assert rows["vllm-triton"]["reason"] == rows["vllm-cuda"]["reason"] == "vLLM is not installed"
    assert payload["auto_baseline"] == "reference (PyTorch emulation of aiter; aiter unavailable)"


def test_doctor_table_shows_status_versions_and_device(capsys):
    code, out, _ = run(capsys, "doctor")
    assert code == 0
    text = " ".join(out.split())
    for name in producers.names():
        assert name in text
    assert "unavailable" in text and "vLLM is not installed" in text
    assert "torch" in text and torch.__version__ in text
    assert "triton" in text and "deployment FP8" in text


def test_doctor_on_this_cpu_machine(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _, payload = doctor_json(capsys, tmp_path)
    assert payload["device"] == {
        "backend": platform.probe().backend.value, "gpu": False, "name": "cpu", "arch": "cpu", "deployment_fp8": "e4m3fn",
    }
    assert set(payload["versions"]) == {"python", "torch", "triton", "fp8check", "clang (aiter-src)", "nvcc (vllm-src)"}


def test_aiter_available_makes_it_the_auto_baseline(capsys, tmp_path, monkeypatch):
    install(monkeypatch, aiter_standin.modules(preshuffle=True))
    monkeypatch.setattr(aiter, "probe", lambda: MI355)
    code, payload = doctor_json(capsys, tmp_path, "--require", "aiter")
    assert code == 0
    row = next(row for row in payload["producers"] if row["name"] == "aiter")
    assert row["available"] is True and "preshuffle keyword" in row["reason"]
    assert payload["auto_baseline"] == "aiter"


def test_lookalike_aiter_is_named_in_the_doctor(capsys, tmp_path, monkeypatch):
    install(monkeypatch, aiter_standin.lookalike())
    _, payload = doctor_json(capsys, tmp_path)
    row = next(row for row in payload["producers"] if row["name"] == "aiter")
    assert "unrelated PyPI package 'aiter'" in row["reason"]


def test_a_crashing_availability_probe_is_reported_not_raised(capsys, tmp_path, monkeypatch):
    def broken():
        raise RuntimeError("probe exploded\nsecond line")

    entry = dataclasses.replace(producers.REGISTRY[producers.Role.WRITER]["vllm-cuda"], availability=broken)
    monkeypatch.setitem(producers.REGISTRY[producers.Role.WRITER], "vllm-cuda", entry)
    _, payload = doctor_json(capsys, tmp_path)
    row = next(row for row in payload["producers"] if row["name"] == "vllm-cuda")
    assert (row["available"], row["reason"]) == (False, "availability check raised RuntimeError: probe exploded")


# ---- --require ----------------------------------------------------------------------------------


def test_require_an_unavailable_producer_exits_1_naming_it(capsys):
    code, out, err = run(capsys, "doctor", "--require", "aiter")
    assert code == 1
    assert err == ""
    assert " ".join(out.split()).endswith("FAIL: required aiter is not met (aiter is not installed (ROCm's kernel"
                                          " library, pip package amd-aiter; needs a ROCm GPU))")


def test_the_full_report_ends_in_the_verdict_line_quiet_prints(capsys):
    code, out, _ = run(capsys, "doctor", "--require", "reference")
    quiet_code, quiet, _ = run(capsys, "doctor", "--require", "reference", "--quiet")
    assert code == quiet_code == 0
    assert quiet.startswith("PASS: ") and quiet.rstrip().endswith("all required met: reference")
    assert " ".join(out.split()).endswith(" ".join(quiet.split()))


def test_an_unmet_requirement_is_no_byte_verdict_in_junit(capsys, tmp_path):
    import xml.etree.ElementTree as ET

    report = tmp_path / "d.xml"
    assert run(capsys, "doctor", "--require", "aiter", "--quiet", "--junit", str(report))[0] == 1
    assert [f.get("type") for f in ET.parse(report).iter("failure")] == ["Requirement"]


def test_require_what_is_here_exits_0(capsys, tmp_path):
    code, payload = doctor_json(capsys, tmp_path, "--require", "reference", "--require", "reference-vllm")
    assert code == 0
    assert payload["required"] == ["reference", "reference-vllm"] and payload["unmet"] == []


def test_require_gpu_on_a_machine_without_one(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, payload = doctor_json(capsys, tmp_path, "--require", "gpu")
    assert code == 1
    assert payload["unmet"][0]["name"] == "gpu"


def test_require_an_unknown_name_is_a_usage_error(capsys):
    code, out, err = run(capsys, "doctor", "--require", "aiterr")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Invalid value for '--require': unknown aiterr; known: reference" in err


# ---- the Triton interpreter's exact conversion ----------------------------------------------------


def test_triton_exact_reports_the_real_known_answer_check_per_format(capsys, tmp_path):
    from fp8check.triton_cpu import known_answers

    code, payload = doctor_json(capsys, tmp_path, "--require", "triton-exact:e4m3fn")
    assert code == 0
    for fmt in FP8Format:
        ok, reason = known_answers.check(fmt)
        assert payload["triton_exact"][fmt.value] == {"ok": ok, "reason": reason}
    assert payload["triton_exact"]["e4m3fn"]["ok"] is True


# ---- device, architecture and the deployment FP8 format --------------------------------------------


@pytest.mark.parametrize("arch, fmt", [
    ("gfx942:sramecc+:xnack-", FP8Format.E4M3FNUZ), ("gfx941", FP8Format.E4M3FNUZ), ("gfx950", FP8Format.E4M3FN),
    ("gfx90a", FP8Format.E4M3FN), ("sm_90", FP8Format.E4M3FN), ("cpu", FP8Format.E4M3FN),
])
def test_deployment_format_is_fnuz_exactly_on_gfx94x(arch, fmt):
    assert fp8_for_arch(arch) is fmt


def fake_gpu(monkeypatch, *, hip: str | None, cuda: str | None, props) -> None:
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)


def test_probe_on_rocm_reads_gcn_arch_name(monkeypatch):
    fake_gpu(monkeypatch, hip="6.4.1", cuda=None,
             props=SimpleNamespace(name="AMD Instinct MI300X", gcnArchName="gfx942:sramecc+:xnack-", major=9, minor=4))
    found = platform.probe()
    assert found == Platform(Backend.ROCM, True, "AMD Instinct MI300X", "gfx942:sramecc+:xnack-", "cuda")
    assert found.fp8 is FP8Format.E4M3FNUZ


def test_probe_on_cuda_reads_the_compute_capability(monkeypatch):
    fake_gpu(monkeypatch, hip=None, cuda="12.8", props=SimpleNamespace(name="NVIDIA H200", major=9, minor=0))
    found = platform.probe()
    assert (found.backend, found.arch, found.fp8) == (Backend.CUDA, "sm_90", FP8Format.E4M3FN)
