"""One output vocabulary on every command: each format of report/formats.py is an option of every command,
`--json -` puts only JSON on stdout, and every format shows the result's own verdict line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from conftest import run

from fp8check.report.formats import FORMATS

SMALL = ("--num-blocks", "1", "--block", "16", "--head-dim", "64", "--device", "cpu")
COMMANDS = {
    "compare": ("compare", *SMALL, "--candidate", "reference-vllm"),
    "table": ("table", *SMALL),
    "parity": ("parity", "--ctx", "32,64", "--topk", "16", "--heads", "2", "--block", "16", "--head-dim", "64",
               "--writers", "reference-vllm", "--device", "cpu"),
    "gate": ("gate", "ci", "-k", "compare:triton~auto:e4m3fn-ue8m0:b64-h64-q64-n2-shuffle:normal-sequential-s0:cpu"),
    "doctor": ("doctor",),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_takes_every_format(command, capsys):
    from fp8check.cli import cli

    params = {p.name for p in cli.commands[command].params}
    assert {f"{f.name}_path" for f in FORMATS} | {"quiet"} <= params


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_json_to_stdout_is_only_json(command, capsys):
    code, out, err = run(capsys, *COMMANDS[command], "--json", "-")
    payload = json.loads(out)  # nothing but the document on stdout
    assert payload["schema_version"] == 2 and payload["kind"] == command
    assert payload["passed"] is (code == 0), err
    assert err.strip()  # the report went to stderr


def test_record_writes_json_to_stdout(tmp_path, capsys):
    out_file = tmp_path / "g.safetensors"
    code, out, err = run(capsys, "record", *SMALL, "--out", str(out_file), "--json", "-")
    payload = json.loads(out)
    assert code == 0 and payload["kind"] == "record" and payload["path"] == str(out_file) and out_file.is_file()


def test_every_format_carries_the_same_verdict_line(tmp_path, capsys):
    """A failing compare: --quiet, JSON, JUnit and Markdown all say the one verdict line."""
    paths = {f.name: tmp_path / f"out.{f.name}" for f in FORMATS}
    argv = ["compare", *SMALL, "--candidate", "triton-buggy"]
    for name, path in paths.items():
        argv += [f"--{name}", str(path)]
    code, out, err = run(capsys, *argv, "--quiet")
    verdict = out.strip()
    assert code == 1 and verdict.startswith("DIFFERENT: ") and "\n" not in verdict
    assert json.loads(paths["json"].read_text())["verdict"] == verdict
    failure = ET.parse(paths["junit"]).getroot().find(".//failure")
    assert failure.get("message").startswith(verdict + "; ")
    assert verdict in paths["markdown"].read_text()


def test_two_formats_cannot_share_stdout(capsys):
    code, out, err = run(capsys, "doctor", "--json", "-", "--junit", "-")
    assert (code, out) == (2, "") and "only one format can go to stdout" in err
