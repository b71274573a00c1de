"""Output files that cannot destroy or lie, and user errors that are exit 2 with one line (issue 24, items 2
and 5): every report file is checked like `record --out`, written whole, and replaced by the run's
error when the run fails; FIFOs and devices are refused unopened; inputs are read into memory."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import run
import pytest

from fp8check.producers import golden

SMALL = ("--block", "16", "--head-dim", "64", "--num-blocks", "2")
OUTPUTS = {"--json": "r.json", "--junit": "r.xml", "--markdown": "r.md"}



def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("fp8check: error: "), err
    for fragment in fragments:
        assert fragment in err, err


@pytest.fixture
def recorded(capsys, tmp_path) -> Path:
    out = tmp_path / "reference.safetensors"
    code, _, err = run(capsys, "record", "--producer", "reference", "--out", out, *SMALL)
    assert code == 0, err
    return out


@pytest.mark.parametrize("option", sorted(OUTPUTS))
def test_a_report_path_that_is_a_symlink_is_refused_and_its_target_kept(capsys, tmp_path, option):
    target = tmp_path / "users_file.txt"
    target.write_text("the user's own file\n")
    link = tmp_path / OUTPUTS[option]
    link.symlink_to(target)
    code, _, err = run(capsys, "compare", "--candidate", "reference", "--baseline", "reference", *SMALL, option, link)
    assert_one_line_error(code, err, f"{option} {link}: is a symbolic link")
    assert target.read_text() == "the user's own file\n"


@pytest.mark.parametrize("option", sorted(OUTPUTS))
def test_a_report_path_that_is_a_fifo_is_refused_without_opening_it(capsys, tmp_path, option):
    fifo = tmp_path / OUTPUTS[option]
    os.mkfifo(fifo)
    code, _, err = run(capsys, "compare", "--candidate", "reference", "--baseline", "reference", *SMALL, option, fifo)
    assert_one_line_error(code, err, f"{option} {fifo}: is a named pipe (FIFO); give a regular file or a new path")


def test_json_pointed_at_the_golden_being_replayed_is_refused_and_the_golden_kept(capsys, recorded):
    before = recorded.read_bytes()
    code, _, err = run(capsys, "compare", "--baseline", f"golden:{recorded}", "--candidate", "reference",
                       "--json", recorded)
    assert_one_line_error(code, err, f"--json {recorded}: is a file this run reads ({recorded})")
    assert recorded.read_bytes() == before


def test_record_over_its_own_input_is_refused(capsys, tmp_path, recorded):
    code, _, err = run(capsys, "record", "--producer", "reference", "--input", recorded, "--out", recorded)
    assert_one_line_error(code, err, f"--out {recorded}: is a file this run reads")


def test_a_failed_run_replaces_an_earlier_passing_json_and_junit_with_its_error(capsys, tmp_path):
    paths = {option: tmp_path / name for option, name in OUTPUTS.items() if option != "--markdown"}
    outputs = [str(x) for option, path in paths.items() for x in (option, path)]
    code, _, err = run(capsys, "compare", "--candidate", "reference", "--baseline", "reference", *SMALL, *outputs)
    assert code == 0, err
    assert json.loads(paths["--json"].read_text())["identical"] is True
    code, _, err = run(capsys, "compare", "--candidate", "reference", "--baseline", "reference", *SMALL,
                       "--input", tmp_path / "absent.safetensors", *outputs)
    assert_one_line_error(code, err, "absent.safetensors: no such file")
    report = json.loads(paths["--json"].read_text())
    assert report["passed"] is False and report["exit_code"] == 2 and "absent.safetensors: no such file" in report["error"]
    suite = ET.parse(paths["--junit"]).getroot()
    assert suite.get("errors") == "1" and "absent.safetensors" in suite.find(".//error").get("message")


def test_a_legal_252_byte_output_name_is_written(capsys, tmp_path):
    out = tmp_path / ("g" * 240 + ".safetensors")
    assert len(out.name) == 252
    code, _, err = run(capsys, "record", "--producer", "reference", "--out", out, *SMALL)
    assert code == 0, err
    assert golden.read(out).producer == "reference"
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left


@pytest.mark.parametrize("argv, fragment", [
    (("record", "--producer", "reference", "--out", "/proc/x", *SMALL), "--out /proc/x: cannot write in /proc"),
    (("compare", "--seed", str(2**63), *SMALL), "--seed"),
    (("compare", "--candidate", "reference", "--timeout", "nan", *SMALL),
     "Invalid value for '--timeout': nan is not a finite number."),
    (("compare", "--max-diff-fraction", "nan", *SMALL), "nan is not a finite number"),
])
def test_user_errors_are_exit_2_with_one_line(capsys, argv, fragment):
    code, _, err = run(capsys, *argv)
    assert code == 2, err
    assert fragment in err and err.count("\n") <= 2, err  # click's usage errors print "Usage:" + one line


def test_a_toml_nested_100000_deep_is_exit_2(capsys, tmp_path):
    config = tmp_path / "deep.toml"
    config.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    code, _, err = run(capsys, "gate", config)
    assert_one_line_error(code, err, f"{config}: not valid TOML (nested too deeply)")


@pytest.mark.parametrize("what", ["--input", "golden", "gate config"])
def test_a_fifo_as_input_golden_or_config_is_refused_unopened(capsys, tmp_path, what):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = {"--input": ("compare", "--candidate", "reference", "--input", fifo),
            "golden": ("compare", "--candidate", "reference", "--baseline", f"golden:{fifo}"),
            "gate config": ("gate", fifo)}[what]
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, f"{fifo}: is a named pipe (FIFO), not a regular file")


def test_a_golden_is_read_into_memory_so_truncating_the_file_changes_nothing(recorded):
    loaded = golden.read(recorded)
    expected = loaded.kv_cache.clone()
    with open(recorded, "r+b") as f:  # a concurrent `cp` truncates first
        f.truncate(0)
    assert torch_equal(loaded.kv_cache, expected)  # a mapped file would raise SIGBUS here


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


def test_a_refused_output_still_leaves_no_stale_report_in_the_others(capsys, tmp_path):
    junit = tmp_path / "r.xml"
    junit.write_text('<testsuites tests="1" failures="0" errors="0"/>\n')  # an earlier run's pass
    link = tmp_path / "r.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    code, _, err = run(capsys, "compare", "--candidate", "reference", "--baseline", "reference", *SMALL,
                       "--json", link, "--junit", junit)
    assert_one_line_error(code, err, f"--json {link}: is a symbolic link")
    assert ET.parse(junit).getroot().get("errors") == "1"
    assert not (tmp_path / "elsewhere.json").exists()


def test_an_input_file_is_read_into_memory_so_truncating_it_changes_nothing(tmp_path):
    import torch
    from safetensors.torch import save_file

    from fp8check.core.inputs import read_inputs

    path = tmp_path / "k.safetensors"
    k = torch.randn(32, 64).to(torch.bfloat16)
    save_file({"k": k, "slot_mapping": torch.arange(32)}, str(path))
    replay = read_inputs(path)
    with open(path, "r+b") as f:
        f.truncate(0)
    assert torch.equal(replay.k, k) and torch.equal(replay.slot_mapping, torch.arange(32))


def test_a_device_as_input_is_refused_unopened(capsys):
    code, _, err = run(capsys, "compare", "--candidate", "reference", "--input", "/dev/zero")
    assert_one_line_error(code, err, "/dev/zero: is a device, not a regular file")
