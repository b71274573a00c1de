"""Project tables, composed presets and `fp8check ecosystem`, offline: the presets here run files written
for the tests (tests/projects/standins.toml: STAND-INS, not any project's code). The released projects'
presets run in `make ecosystem`, which downloads their wheels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fp8check.api import compare_writers
from fp8check.cli import main
from fp8check.run.ecosystem import read_config, run_ecosystem
from fp8check.core.errors import ConfigError, UserError
from fp8check.code.projects.table import parse, projects
from fp8check.core.spec import FP8Format, Layout
from fp8check.code.bind import compile_function

HERE = Path(__file__).parent
STANDINS = "tests/projects/standins.toml"
CI_CONFIG = "tests/projects/ecosystem-ci.toml"
CLONE_ONLY = "tests/projects/clone-only.toml"


@pytest.fixture(autouse=True)
def repository_root(monkeypatch):
    monkeypatch.chdir(HERE.parent)  # preset names hold the table's path relative to the repository


# ---- project tables -----------------------------------------------------------------------------------

TABLE = """
[project]
name = "demo"
package = "demo"
version = "1"
root = "demo"
[bind]
_is_hip = { value = true }
_fnuz = { run = "is_fnuz" }
_shuffle = { run = "is_shuffle" }
_fp8 = { run = "fp8_dtype", call = true }
dtypes = { attrs = { fp8 = { run = "fp8_dtype" } } }
[fallback]
cdiv = { standin = "cdiv" }
"""

SOURCE = """
from demo.platform import _is_hip, _fnuz, _shuffle, _fp8, dtypes
from demo.utils import cdiv
_ignored = _is_hip()

def probe(n):
    return (_is_hip, _fnuz, _shuffle, _fp8(), dtypes.fp8, cdiv(n, 4))
"""


def test_a_project_table_binds_values_run_facts_objects_and_stand_ins():
    import tomllib

    table = parse(tomllib.loads(TABLE), "demo.toml").table
    compiled = compile_function(SOURCE, label="demo", file="demo/ops.py", func="probe", sha256="0" * 64,
                                role="reader", fp8=FP8Format.E4M3FN, table=table, layout=Layout.LINEAR)
    assert compiled.fn(9) == (True, False, False, torch.float8_e4m3fn, torch.float8_e4m3fn, 3)
    compiled.binding.rebind(FP8Format.E4M3FNUZ, Layout.SHUFFLE)
    assert compiled.fn(9) == (True, True, True, torch.float8_e4m3fnuz, torch.float8_e4m3fnuz, 3)
    assert compiled.executed == ("probe",)  # `_ignored = _is_hip()` needed nothing of probe: never ran


def test_a_binding_of_an_unknown_kind_is_a_config_error_naming_it():
    import tomllib

    with pytest.raises(ConfigError, match=r"^bad.toml: x: unknown run fact 'gpu'; known: fp8_dtype, "):
        parse(tomllib.loads(TABLE.replace('run = "is_fnuz"', 'run = "gpu"').replace("_fnuz =", "x =")), "bad.toml")


def test_the_shipped_tables_declare_the_surveyed_presets():
    keys = {(p.key, p.role) for project in projects().values() for p in project.presets}
    assert keys == {("vllm/triton", "writer"), ("vllm/torch", "reader"), ("vllm/triton", "reader"),
                    ("sglang/triton", "writer"), ("lmdeploy/triton", "writer"), ("aiter/triton", "reader"),
                    ("flaggems/triton", "writer"), ("flaggems/triton", "reader")}
    assert all(len(p.sha256) == 64 and p.wheel.startswith(p.package.replace("-", "_")) for p in projects().values())


# ---- composed presets ---------------------------------------------------------------------------------


def test_a_two_step_preset_writes_the_references_bytes():
    result = compare_writers(f"preset:{STANDINS}/two-step", "reference", block=16, num_blocks=3, head_dim=128,
                             fp8="e4m3fn", scale_fmt="ue8m0", layout="linear", slots="shuffled")
    assert result.identical
    assert result.check.result.candidate.provenance["function"] == "quantize then store"


def test_a_preset_whose_files_only_a_clone_holds_names_the_option():
    with pytest.raises(UserError, match=r"^preset:tests/projects/clone-only.toml/from-a-clone: its files are in clone-only.s repository only .*give --checkout clone-only=PATH"):
        compare_writers(f"preset:{CLONE_ONLY}/from-a-clone", "reference", block=16, num_blocks=2)


# ---- the matrix ---------------------------------------------------------------------------------------


def test_the_offline_matrix_gives_one_record_per_run_with_the_expected_outcomes():
    result = run_ecosystem(read_config(CI_CONFIG, {}), torch.device("cpu"))
    outcome = {(r["name"], r["block_size"], r["layout"], r.get("next_n")): (r["status"], r["causes"], r.get("expect"))
               for r in result.records}
    assert outcome == {
        ("two-step", 1, "linear", None): ("identical", [], None),
        ("two-step", 16, "linear", None): ("identical", [], None),
        ("two-step", 16, "shuffle", None): ("skipped", [], None),
        ("vllm-style", 1, "linear", None): ("identical", [], None),
        ("vllm-style", 16, "linear", None): ("different", ["layout"], "different"),
        ("vllm-style", 16, "shuffle", None): ("identical", [], None),
        ("vllm-style-torch", 1, "linear", 1): ("pass", [], None),
        ("vllm-style-torch", 1, "linear", 2): ("pass", [], None),
        ("vllm-style-torch", 16, "linear", 1): ("pass", [], None),
        ("vllm-style-torch", 16, "linear", 2): ("pass", [], None),
        ("vllm-style-torch", 16, "shuffle", 1): ("fault", ["recall"], "different"),
        ("vllm-style-torch", 16, "shuffle", 2): ("fault", ["recall"], "different"),
    }
    skipped = next(r for r in result.records if r["status"] == "skipped")
    assert skipped["reason"] == f"{STANDINS}/two-step writes/reads the linear layout only"
    assert not result.unexpected and not result.errors


def test_ecosystem_json_has_the_documented_fields_and_exit_0_when_only_known_bugs_show(capsys):
    assert main(["ecosystem", "--config", CI_CONFIG, "--json", "-"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert len(runs) == 12
    writer = next(r for r in runs if r["role"] == "writer")
    reader = next(r for r in runs if r["role"] == "reader")
    common = {"project", "version", "function", "role", "block_size", "layout", "fp8", "scale_fmt", "status",
              "causes", "reason"}
    assert common | {"inputs"} <= set(writer) and "next_n" not in writer
    assert common | {"next_n", "recall"} <= set(reader) and "inputs" not in reader
    assert {r["status"] for r in runs} == {"identical", "different", "pass", "fault", "skipped"}


def test_an_expected_bug_that_no_longer_shows_fails_the_command(tmp_path):
    """In a fresh process, as CI runs it (Triton's interpreter mode is the command's own doing)."""
    import os
    import subprocess
    import sys

    config = (HERE / "projects" / "ecosystem-ci.toml").read_text().replace('layout = "shuffle"\nreason', 'layout = "linear"\nreason')
    path = tmp_path / "eco.toml"
    path.write_text(config)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-m", "fp8check", "ecosystem", "--config", str(path), "--quiet"],
                          capture_output=True, text=True, env=env, cwd=HERE.parent)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ("FAIL: 4 identical, 1 different, 4 pass, 2 fault, 1 skipped; 1 known upstream difference(s) as"
                           " expected, 6 unexpected\n")


def test_a_function_binding_loads_another_file_of_the_same_release():
    import tomllib

    table = parse(tomllib.loads(TABLE + '\n[bind.helper]\nfunction = "demo/helpers.py:twice"\n'), "demo.toml").table
    files = {"demo/helpers.py": "def twice(x):\n    return 2 * x\n"}
    loaded = []

    def sibling(path, func):
        loaded.append((path, func))
        return compile_function(files[path], label="demo", file=path, func=func, sha256="1" * 64, role="reader",
                                fp8=None, table=table).fn

    source = "from demo.helpers import twice as helper\n\ndef uses(x):\n    return helper(x) + 1\n"
    compiled = compile_function(source, label="demo", file="demo/ops.py", func="uses", sha256="0" * 64,
                                role="reader", fp8=None, table=table, sibling=sibling)
    assert compiled.fn(20) == 41
    assert loaded == [("demo/helpers.py", "twice")]
