"""Project tables, composed presets and the ecosystem as a gate config, offline: the presets here run files written
for the tests (tests/projects/standins.toml: STAND-INS, not any project's code). The released projects'
presets run in `make ecosystem` (`fp8check gate ecosystem`), which downloads their wheels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fp8check.api import compare_writers
from fp8check.cli import main
from fp8check.core.errors import ConfigError, UserError
from fp8check.code.projects.table import parse, projects
from fp8check.core.spec import CacheSpec, FP8Format, Layout
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


def test_a_table_with_a_misspelt_section_or_project_key_is_refused():
    import tomllib

    with pytest.raises(ConfigError, match=r"^demo.toml: the table: unknown key\(s\) writers; known: project, bind, "):
        parse(tomllib.loads(TABLE + '\n[[writers]]\nname = "w"\n'), "demo.toml")
    with pytest.raises(ConfigError, match=r"^demo.toml: \[project\]: unknown key\(s\) sha265; known: name, "):
        parse(tomllib.loads(TABLE.replace('root = "demo"', 'root = "demo"\nsha265 = "0"')), "demo.toml")


def test_a_preset_with_an_unknown_key_or_a_bad_padding_slot_is_refused():
    import tomllib

    writer = '\n[[writer]]\nname = "w"\n{}\n[[writer.step]]\nfile = "demo/ops.py"\ncall = "write"\n'
    with pytest.raises(ConfigError, match=r"^demo.toml: \[\[writer\]\] w: unknown key\(s\) layuots; known: name, "):
        parse(tomllib.loads(TABLE + writer.format('layuots = ["linear"]')), "demo.toml")
    with pytest.raises(ConfigError, match=r"^demo.toml: \[\[writer\]\] w: pad_slot must be -1 or a slot >= 0, got -2$"):
        parse(tomllib.loads(TABLE + writer.format("pad_slot = -2")), "demo.toml")


# ---- composed presets ---------------------------------------------------------------------------------


def test_a_two_step_preset_writes_the_references_bytes():
    result = compare_writers(f"preset:{STANDINS}/two-step", "reference", block=16, num_blocks=3, head_dim=128,
                             fp8="e4m3fn", scale_fmt="ue8m0", layout="linear", slots="shuffled")
    assert result.identical
    assert result.check.result.candidate.provenance["function"] == "quantize then store"


def test_a_preset_whose_files_only_a_clone_holds_names_the_option():
    with pytest.raises(UserError, match=r"^preset:tests/projects/clone-only.toml/from-a-clone: its files are in clone-only.s repository only .*give --checkout clone-only=PATH"):
        compare_writers(f"preset:{CLONE_ONLY}/from-a-clone", "reference", block=16, num_blocks=2)


# ---- the matrix: a gate config ------------------------------------------------------------------------


def test_the_offline_matrix_gives_one_outcome_per_run_with_the_expected_status():
    from fp8check.api import run_gate

    run = run_gate(CI_CONFIG)
    status = {(o.kind, o.case_id.split("~")[0].rsplit("/", 1)[-1] if o.kind == "compare" else
               o.case_id.split("baseline=")[1].split(":reader=")[0].rsplit("/", 1)[-1],
               o.case_id.split(":b")[1].split("-")[0] if o.kind == "compare" else o.case_id.split("block=")[1].split(":")[0],
               "shuffle" if "shuffle:" in o.case_id or "layout=shuffle" in o.case_id else "linear",
               o.case_id.split("next_n=")[1][0] if "next_n=" in o.case_id else None): (o.status.value, o.reason)
              for o in run.outcomes}
    differs = "it writes the shuffle layout whenever block_size > 1"
    row_major = "it reads the value region row-major whatever the layout"
    assert status == {
        ("compare", "two-step", "1", "linear", None): ("passed", None),
        ("compare", "vllm-style", "1", "linear", None): ("passed", None),
        ("compare", "two-step", "16", "linear", None): ("passed", None),
        ("compare", "two-step", "16", "shuffle", None): ("skipped", None),
        ("compare", "vllm-style", "16", "linear", None): ("passed", differs),
        ("compare", "vllm-style", "16", "shuffle", None): ("passed", None),
        ("parity", "reference", "1", "linear", "1"): ("passed", None),
        ("parity", "reference", "1", "linear", "2"): ("passed", None),
        ("parity", "reference", "16", "linear", "1"): ("passed", None),
        ("parity", "reference", "16", "linear", "2"): ("passed", None),
        ("parity", "reference", "16", "shuffle", "1"): ("passed", row_major),
        ("parity", "reference", "16", "shuffle", "2"): ("passed", row_major),
        ("parity", "two-step", "16", "linear", None): ("passed", None),
    }
    skipped = next(o for o in run.outcomes if o.skipped)
    assert skipped.error == f"preset:{STANDINS}/two-step writes/reads the linear layout only"
    assert run.exit_code == 0
    layout = next(o for o in run.outcomes if o.reason == differs)
    assert [c.category.value for c in layout.result.diagnosis.causes] == ["layout"]
    fault = next(o for o in run.outcomes if o.reason == row_major)
    assert fault.result.result.reader_fault and fault.result.result.reader_reads == "linear"


def test_ecosystem_json_junit_and_markdown_list_every_run_with_its_seconds(capsys, tmp_path):
    junit, markdown = tmp_path / "eco.xml", tmp_path / "eco.md"
    assert main(["gate", CI_CONFIG, "--json", "-", "--junit", str(junit), "--markdown", str(markdown)]) == 0
    document = json.loads(capsys.readouterr().out)
    cases = document["cases"]
    assert len(cases) == 13 and set(document["run"]["case_seconds"]) == {c["id"] for c in cases}
    assert all(document["run"]["case_seconds"][c["id"]] > 0 for c in cases if c["status"] != "skipped")
    cross = next(c for c in cases if "baseline=preset:" in c["id"])
    assert (cross["result"]["baseline"]["name"], cross["result"]["reader"]["name"]) == (
        f"preset:{STANDINS}/two-step", f"preset:{STANDINS}/vllm-style-torch")
    declared = next(c for c in cases if c.get("expect_reason"))
    assert declared["status"] == "passed"
    import xml.etree.ElementTree as ET

    testcases = ET.parse(junit).getroot().findall("./testsuite/testcase")
    assert [t.get("name") for t in testcases] == [c["id"] for c in cases]
    assert all(float(t.get("time")) > 0 for t in testcases if t.find("skipped") is None)
    assert sum(1 for line in markdown.read_text().splitlines() if line.startswith("| ") and "`" in line) == 13


def test_an_expected_difference_that_no_longer_shows_fails_the_gate(tmp_path):
    """In a fresh process, as CI runs it (Triton's interpreter mode is the command's own doing)."""
    import os
    import subprocess
    import sys

    config = (HERE / "projects" / "ecosystem-ci.toml").read_text().replace('layout = "shuffle"\nexpect', 'layout = "linear"\nexpect')
    path = tmp_path / "eco.toml"
    path.write_text(config)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-m", "fp8check", "gate", str(path), "-k", "parity", "--quiet"],
                          capture_output=True, text=True, env=env, cwd=HERE.parent)
    assert done.returncode == 1, done.stderr
    # the row now declares the linear reads different: those 5 agree and fail, the 2 shuffle faults are findings
    assert done.stdout.startswith("FAIL: 0 passed, 7 failed, 0 errors of 7 cases in "), done.stdout


# ---- one rule for runs that do not run ----------------------------------------------------------------


def _gate(tmp_path, text: str, *args) -> tuple[int, str, str]:
    import subprocess
    import sys

    path = tmp_path / "gate.toml"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "fp8check", "gate", str(path), *args], capture_output=True,
                          text=True, cwd=HERE.parent)
    return done.returncode, done.stdout, done.stderr


def test_a_gate_whose_every_case_is_skipped_does_not_pass(tmp_path):
    code, out, _ = _gate(tmp_path, f'[[case]]\ncandidate = "preset:{STANDINS}/two-step"\nfp8 = "e4m3fnuz"\n'
                                   'block = 16\nlayout = "linear"\n', "--quiet")
    assert code == 2
    assert out.startswith("FAIL: 0 passed, 0 failed, 0 errors, 1 skipped of 1 case in ")
    assert out.endswith(" s (no case ran: a gate that runs nothing never passes)\n")


def test_a_missing_checkout_is_an_error_naming_the_option(tmp_path):
    code, out, _ = _gate(tmp_path, f'[[case]]\ncandidate = "preset:{CLONE_ONLY}/from-a-clone"\nblock = 16\n'
                                   'num_blocks = 2\n', "--json", "-")
    case = json.loads(out)["cases"][0]
    assert code == 2 and case["status"] == "error" and case["exit_code"] == 2
    assert case["error"].startswith(f"preset:{CLONE_ONLY}/from-a-clone: its files are in clone-only's repository only")
    assert case["error"].endswith("give --checkout clone-only=PATH")


def test_a_checkout_that_is_not_the_projects_clone_is_an_error(tmp_path):
    code, out, _ = _gate(tmp_path, f'[[case]]\ncandidate = "preset:{CLONE_ONLY}/from-a-clone"\nblock = 16\n'
                                   'num_blocks = 2\n', "--checkout", f"clone-only={tmp_path}", "--json", "-")
    case = json.loads(out)["cases"][0]
    assert code == 2 and case["status"] == "error"
    assert "clone_only/ops.py" in case["error"] and "no such file" in case["error"]


def test_offline_with_an_empty_cache_folder_the_ecosystem_names_the_fetch_failure(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "FP8CHECK_CACHE_DIR": str(tmp_path / "cache"), "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": ""}
    done = subprocess.run([sys.executable, "-m", "fp8check", "gate", "ecosystem", "-k", "vllm/triton and b1-",
                           "--quiet"], capture_output=True, text=True, cwd=HERE.parent, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("FAIL: 0 passed, 0 failed, 16 errors of 16 cases")
    done = subprocess.run([sys.executable, "-m", "fp8check", "gate", "ecosystem", "-k", "vllm/triton and b1-",
                           "--json", "-"], capture_output=True, text=True, cwd=HERE.parent, env=env)
    errors = {c["error"] for c in json.loads(done.stdout)["cases"]}
    assert len(errors) == 1 and errors.pop().startswith("pkg:vllm==0.33.0: pip download failed: ")


BAD_GATE = [
    ("[[case]]\nblock = 0\n", "[[case]] #1: block = 0"),
    ('[[case]]\ntokens = "x"\n', "[[case]] #1: unknown key(s) tokens for a compare case"),
    ('[[case]]\nkind = "parity"\nheads = 0\n', "[[case]] #1: heads = 0"),
    ("[[case]]\nexpect = 5\n", "[[case]] #1: expect = 5: expected one of same, different, scale-ulp"),
    ('[[case]]\nfp8 = ["e5m2"]\n', "[[case]] #1: fp8 = 'e5m2'"),
    ('[[case]]\n[[expect]]\nfp8 = "e4m3fn"\nexpect = "different"\nreason = "r"\nblok = 16\n',
     "[[expect]] #1: unknown field(s) blok"),
    ('[[case]]\n[[expect]]\nblock = 0\nexpect = "different"\nreason = "r"\n', "[[expect]] #1: block = 0"),
    ('[[case]]\n[[expect]]\nblock = 16\nexpect = "different"\nreason = "r"\n', "[[expect]] #1: matches no case"),
    ('[[case]]\n[[expect]]\nblock = 64\nexpect = "different"\n', "[[expect]] #1: needs a reason"),
    ('[[case]]\n[[expect]]\nblock = 64\nexpect = "same"\nreason = "r"\n', "[[expect]] #1: expect = 'same'"),
    ('[ecosystem]\nwriters = ["vllm/triton"]\n', "an [ecosystem] section is the old matrix format"),
]


@pytest.mark.parametrize("text, message", BAD_GATE, ids=[m for _, m in BAD_GATE])
def test_bad_gate_values_are_one_line_and_exit_2(tmp_path, text, message):
    code, out, err = _gate(tmp_path, text)
    assert code == 2, out + err
    assert len(err.splitlines()) == 1 and message in err, err


def test_a_cache_too_large_for_the_machine_is_an_error_naming_its_options(tmp_path):
    code, out, _ = _gate(tmp_path, "[[case]]\nnum_blocks = 1000000000000\n", "--json", "-")
    (case,) = json.loads(out)["cases"]
    assert code == 2 and case["status"] == "error"
    assert case["error"].startswith("--num-blocks 1000000000000, --block 64, --head-dim 128 (two caches, the diff and"
                                    " K) needs 194,304,000,000,052,800 bytes, only ")


def test_a_checkout_without_a_path_is_one_line_and_exit_2(tmp_path):
    code, _, err = _gate(tmp_path, "[[case]]\n", "--checkout", "flaggems", "--list")
    assert code == 2
    assert err == "fp8check: error: --checkout 'flaggems': expected PROJECT=PATH, e.g. flaggems=../FlagGems\n"
    code, _, err = _gate(tmp_path, "[[case]]\n", "--checkout", f"nosuch={tmp_path}", "--list")
    assert code == 2
    assert err == (f"fp8check: error: --checkout nosuch: {tmp_path / 'gate.toml'} runs no preset of a project named"
                   " 'nosuch' (the projects of its presets: none)\n")


def test_single_commands_take_checkouts_and_refuse_a_spec_the_preset_declares_unsupported(capsys):
    assert main(["compare", "--candidate", f"preset:{STANDINS}/two-step", "--fp8", "e4m3fnuz"]) == 2
    assert capsys.readouterr().err == f"fp8check: error: preset:{STANDINS}/two-step supports e4m3fn only\n"
    assert main(["compare", "--candidate", f"preset:{STANDINS}/two-step", "--checkout", "flagems=.",
                 "--block", "16", "--layout", "linear"]) == 2
    assert capsys.readouterr().err == ("fp8check: error: --checkout flagems: this compare runs no preset of a project"
                                       " named 'flagems' (the projects of its presets: standins)\n")


# ---- --candidate: the shipped gate for another writer ----------------------------------------------------


def test_candidate_puts_the_writer_where_fp8checks_own_stands_with_its_presets_conventions(tmp_path):
    from fp8check.run.gate_config import load

    table = (HERE / "projects" / "standins.toml").read_text().replace('local = ".."', f'local = "{HERE}"')
    table = table.replace('layouts = ["linear"]\n', 'layouts = ["linear"]\npad_slot = 0\n', 1)
    (tmp_path / "padding.toml").write_text(table)
    name = f"preset:{tmp_path}/padding.toml/two-step"
    before, after = load("ci").cases, load("ci", candidate=name).cases
    assert len(before) == len(after) > 100  # every case of the shipped gate, none lost or added
    for old, new in zip(before, after):
        ours = (old.kind == "compare" and old.values["candidate"] == "triton") or (
            old.kind == "table" and old.values["fixed"] == "triton")
        if old.kind == "compare":
            assert new.values["candidate"] == (name if ours else old.values["candidate"])
            assert new.values["pad_slot"] == (0 if ours else -1)
        elif old.kind == "table":
            assert (new.values["fixed"], new.values["buggy"]) == (name, "triton-buggy")
        else:
            assert new.values["writers"] == ("triton-buggy", name)


def test_the_shipped_gate_runs_a_presets_writer_and_skips_what_it_declares_unsupported(capsys):
    name = f"preset:{STANDINS}/vllm-style"
    assert main(["gate", "ci", "--candidate", name, "-k", "vllm-style and normal-sequential and b64 and auto",
                 "--json", "-"]) == 0
    cases = json.loads(capsys.readouterr().out)["cases"]
    assert [(c["id"].split("~")[0], c["status"]) for c in cases] == [
        (f"compare:{name}", "passed")] * 3 + [(f"table:triton-buggy+{name}", "passed")]
    assert [c["result"]["identical"] for c in cases[:3]] == [True, True, False]  # fp32: within its 1-code budget


def test_gate_cases_run_as_pytest_items_spread_by_xdist(tmp_path):
    import subprocess
    import sys

    (tmp_path / "test_eco.py").write_text(
        "import pytest\nfrom fp8check.pytest_plugin import fp8check_gate_cases\n\n"
        f"@pytest.mark.parametrize('case', fp8check_gate_cases({CI_CONFIG!r}))\n"
        "def test_case(fp8check, case):\n    fp8check.check_case(case)\n")
    from importlib import metadata

    # a checkout on PYTHONPATH (a GPU image's torch environment) has no entry point: the plugin by name
    registered = any(ep.value.startswith("fp8check") for ep in metadata.entry_points(group="pytest11"))
    plugin = () if registered else ("-p", "fp8check.pytest_plugin")
    done = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_eco.py"), "-n", "2", "-v",
                           "-p", "no:cacheprovider", *plugin, "-rs"], capture_output=True, text=True, cwd=HERE.parent)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "12 passed, 1 skipped" in done.stdout
    workers = {line.split("]")[0] for line in done.stdout.splitlines() if " PASSED " in line}
    assert workers == {"[gw0", "[gw1"}  # both workers ran cases
    assert f"SKIPPED [1] {Path(__file__).name}" not in done.stdout  # the skip is the case's own, with its reason
    assert "two-step writes/reads the linear layout only" in done.stdout


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


def test_a_presets_workspace_allocates_on_the_device_of_each_run(monkeypatch):
    # on a GPU machine, a reader run on the CPU got vLLM's workspace (its logits) on cuda:0: the workspace
    # followed the machine's default device at load time, not the run's
    from fp8check.code.load import prepare_to_run
    from fp8check.code.projects import compose
    from fp8check.triton_cpu.interpreter import scope_for

    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=128, layout=Layout.LINEAR)
    with monkeypatch.context() as machine:
        machine.setattr(torch.cuda, "is_available", lambda: True)  # what loading sees on a GPU machine
        loaded = compose.load(f"preset:{STANDINS}/vllm-style-triton", "reader", spec=spec)
    cpu = torch.device("cpu")
    prepare_to_run(loaded, spec.fp8, cpu)
    q = torch.randn(1, 1, 4, 128).to(torch.float8_e4m3fn)
    cache = torch.zeros(2, 16, 1, spec.row_bytes, dtype=torch.uint8)
    with scope_for(cpu):
        logits = loaded.fn(q, cache, torch.ones(1, 4), torch.tensor([20], dtype=torch.int32),
                           torch.tensor([[1, 0]], dtype=torch.int32), 32)
    assert logits.device == cpu and logits.shape == (1, 32)


def test_an_expect_row_for_another_device_applies_when_gate_device_puts_the_case_there(tmp_path):
    from fp8check.run.gate_config import load

    config = tmp_path / "gate.toml"
    config.write_text('[defaults]\ndevice = "cpu"\n[[case]]\nscale_fmt = ["ue8m0", "fp32"]\n'
                      '[[expect]]\nscale_fmt = "fp32"\ndevice = "cuda"\nexpect = "scale-ulp"\nreason = "r"\n')
    here = {c.values["scale_fmt"]: c.values.get("expect", "same") for c in load(str(config)).cases}
    there = {c.values["scale_fmt"]: c.values.get("expect", "same") for c in load(str(config), device="cuda").cases}
    assert here == {"ue8m0": "same", "fp32": "same"} and there == {"ue8m0": "same", "fp32": "scale-ulp"}
    config.write_text(config.read_text().replace('scale_fmt = "fp32"\ndevice', 'scale_fmt = "fp32"\nblock = 16\ndevice'))
    with pytest.raises(ConfigError, match=r"\[\[expect\]\] #1: matches no case"):
        load(str(config), device="cuda")
