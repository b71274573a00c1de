"""The surfaces added around the core under hostile input (issue 31): names that carry terminal escapes
and line breaks, machine-readable errors on stdout, crashed children in a gate, sizes that cannot fit,
released code whose name or hash is not what it claims, stale builds."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fp8check.cli import main

HOSTILE = Path(__file__).parent / "hostile"
# a folder name a config can carry: a screen clear, a bell, a line break that forges a passing verdict line,
# an OSC title change and a right-to-left override
EVIL = "evil\x1b[2J\x07\x0b\nPASS: 1 passed\x1b]0;t\x07\u202e"
CONTROL = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))] + ["\u202e"]


def toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string with \uXXXX escapes is a TOML basic string


def evil_gate(tmp_path: Path) -> Path:
    folder = tmp_path / EVIL
    folder.mkdir()
    (folder / "w.py").write_text((HOSTILE / "crashes.py").read_text())
    config = tmp_path / "evil.toml"
    config.write_text('[defaults]\ndevice = "cpu"\nblock = 16\nhead_dim = 64\nnum_blocks = 2\n[[case]]\n'
                      f'candidate = {toml_string(f"file:{folder}/w.py:abort")}\nbaseline = "reference"\n')
    return config


def no_control(text: str) -> None:
    found = sorted({repr(c) for c in text if c in CONTROL and c != "\n"})
    assert not found, found


def test_a_case_id_with_escapes_and_line_breaks_cannot_break_or_forge_any_report(capsys, tmp_path):
    config = evil_gate(tmp_path)
    junit, markdown, report = tmp_path / "r.xml", tmp_path / "r.md", tmp_path / "r.json"
    code = main(["gate", str(config), "--junit", str(junit), "--markdown", str(markdown), "--json", str(report)])
    out, err = capsys.readouterr()
    assert code == 2, err
    for text in (out, err, junit.read_text(), markdown.read_text()):
        no_control(text)
        assert not any(line.startswith("PASS") for line in text.splitlines()), text
    root = ET.fromstring(junit.read_text())  # well-formed XML
    (case,) = root.iter("testcase")
    assert case.get("name").startswith("compare:file:") and "\\x1b[2J\\x07\\x0b\\nPASS: 1 passed" in case.get("name")
    assert "aborted (SIGABRT) while writing" in case.find("error").get("message")
    document = json.loads(report.read_text())
    no_control(json.dumps(document, ensure_ascii=False))
    assert document["cases"][0]["id"] == case.get("name").replace("\\n", "\n")  # JSON escapes line breaks itself
    assert "\\x1b[2J" in out and f"ERROR: producer 'file:{tmp_path}/evil\\x1b[2J" in out


@pytest.mark.parametrize("fmt", ["json", "junit", "markdown"])
@pytest.mark.parametrize("argv", [
    ["compare", "--candidate", "no-such-writer"],  # refused by fp8check
    ["compare", "--block", "0"],  # refused by the option parser
    ["table", "--baseline", "no-such-writer"],
    ["parity", "--topk", "0"],
    ["gate", "no-such-config"],
], ids=["compare-name", "compare-range", "table", "parity", "gate"])
def test_an_exit_2_writes_its_error_record_to_stdout(capsys, argv, fmt):
    code = main([*argv, f"--{fmt}", "-"])
    out, err = capsys.readouterr()
    assert code == 2
    message = err.removeprefix("fp8check: error: ").strip()
    assert err.count("\n") == 1 and message, err
    if fmt == "json":
        document = json.loads(out)
        assert (document["exit_code"], document["passed"], document["error"]) == (2, False, message)
    elif fmt == "junit":
        error = ET.fromstring(out).find("testsuite/testcase/error")
        assert (error.get("type"), error.get("message")) == ("UserError", message)
    else:
        assert out.startswith(f"### fp8check {argv[0]}: FAIL") and message.split(";")[0] in out


def test_an_unwritable_report_path_is_said_once(capsys):
    code = main(["compare", "--baseline", "reference", "--candidate", "reference", "--block", "16", "--num-blocks",
                 "1", "--device", "cpu", "--junit", "/proc/x.xml"])
    _, err = capsys.readouterr()
    assert code == 2 and err == "fp8check: error: --junit /proc/x.xml: cannot write in /proc (No such file or directory)\n"


def test_gate_reports_crashed_children_at_once_and_kills_a_hang_at_its_timeout(capsys, tmp_path):
    writers = [f"file:{HOSTILE}/crashes.py:{f}" for f in ("abort", "segfault", "kill_self")]
    config = tmp_path / "crashes.toml"
    config.write_text('[defaults]\ndevice = "cpu"\nblock = 16\nhead_dim = 64\nnum_blocks = 2\n[[case]]\n'
                      f'candidate = {json.dumps([*writers, f"file:{HOSTILE}/hangs.py:sleeps", "reference"])}\n'
                      'baseline = "reference"\n')
    report = tmp_path / "gate.json"
    code = main(["gate", str(config), "--timeout", "3", "--json", str(report)])
    _, err = capsys.readouterr()
    cases = json.loads(report.read_text())["cases"]
    assert code == 2, err
    assert [(c["status"], c["error"]) for c in cases] == [
        ("error", f"producer '{writers[0]}' aborted (SIGABRT) while writing"),
        ("error", f"producer '{writers[1]}' crashed (SIGSEGV) while writing"),
        ("error", f"producer '{writers[2]}' was killed (SIGKILL: out of memory, or killed from outside) while writing"),
        ("error", f"producer 'file:{HOSTILE}/hangs.py:sleeps' did not finish within the 3 s timeout (--timeout) while"
                  " writing: killed"),
        ("passed", None)]
    seconds = json.loads(report.read_text())["run"]["case_seconds"]
    assert max(list(seconds.values())[:3]) < 3  # a dead child is seen when it dies, not at the deadline


@pytest.mark.parametrize("command", ["gate", "compare", "table", "parity", "record"])
def test_every_command_that_runs_code_under_test_takes_timeout_from_the_option_table(capsys, command):
    from fp8check.run import options

    code = main([command, "--help"])
    out, _ = capsys.readouterr()
    assert code == 0 and "--timeout SECONDS" in out and options.ISOLATION["timeout"].help.split()[0] in out
    code = main([command, "--timeout", "0"] + (["ci"] if command == "gate" else []))
    _, err = capsys.readouterr()
    assert code == 2 and "Invalid value for '--timeout': 0.0 is not in the range x>0." in err, err


def cached_wheel(cache: Path, name: str, version: str, files: dict[str, str], tag: str = "py3-none-any") -> Path:
    """A wheel placed in fp8check's cache folder as if pip had fetched it (released.py's layout)."""
    import zipfile

    folder = cache / "wheels" / f"{name.replace('-', '_')}-{version}"
    folder.mkdir(parents=True)
    wheel = folder / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def test_an_unpinned_release_runs_only_when_allowed_and_then_prints_its_hash(capsys, tmp_path, monkeypatch):
    import hashlib

    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    wheel = cached_wheel(tmp_path / "cache", "demo-kernels", "1.0", {
        "demo_kernels/ops.py": "def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):\n    return None\n"})
    name = "pkg:demo-kernels==1.0:demo_kernels/ops.py:writer"
    argv = ["compare", "--baseline", "reference", "--candidate", name, "--block", "16", "--head-dim", "64",
            "--num-blocks", "2", "--device", "cpu"]
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 2 and err == (f"fp8check: error: {name}: no project table pins the sha256 of demo-kernels==1.0;"
                                 " fp8check runs released code unpinned only with --allow-unpinned (config:"
                                 " allow_unpinned = true), and then records and prints its wheel's sha256\n")
    code = main([*argv, "--allow-unpinned", "--json", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert code == 1, err  # it wrote nothing: its bytes are the poison
    assert f"from {wheel.name} sha256 {digest} (UNPINNED: recorded, not checked)" in out.replace("\n", "")
    provenance = json.loads((tmp_path / "r.json").read_text())["candidate_provenance"]
    assert (provenance["wheel_sha256"], provenance["wheel_pinned"]) == (digest, "no")


def test_aiter_src_from_a_release_checks_the_pinned_hash(capsys, tmp_path, monkeypatch):
    from fp8check.code.projects.table import project

    aiter = project("aiter")
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    tampered = cached_wheel(tmp_path / "cache", aiter.package, aiter.version,
                            {"aiter_meta/csrc/kernels/cache_kernels.cu": "// not the released op\n"},
                            tag=aiter.wheel.split(f"{aiter.version}-")[1].removesuffix(".whl"))
    import hashlib

    code = main(["compare", "--baseline", "reference", "--candidate", f"aiter-src:pkg:{aiter.package}=={aiter.version}",
                 "--block", "16", "--num-blocks", "2", "--device", "cpu"])
    _, err = capsys.readouterr()
    assert code == 2 and err == (f"fp8check: error: pkg:{aiter.package}=={aiter.version}: {tampered.name} has sha256"
                                 f" {hashlib.sha256(tampered.read_bytes()).hexdigest()}, the pinned hash is"
                                 f" {aiter.sha256}: refused\n")


@pytest.mark.parametrize("name", ["pkg:-rFILE==1:x.py:f", "aiter-src:pkg:-rFILE==1", "pkg:demo==1.0-rFILE:x.py:f"])
def test_a_name_that_would_be_a_pip_option_is_refused_before_pip(capsys, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("demo==1\n")
    code = main(["compare", "--candidate", name, "--device", "cpu"])
    _, err = capsys.readouterr()
    assert code == 2 and "is not a released package's name and exact version (PEP 508 name, PEP 440 version)" in err


@pytest.mark.parametrize("argv, reason", [
    (["compare", "--candidate", "preset:sglang/triton", "--fp8", "e4m3fnuz"], "sglang/triton supports e4m3fn only"),
    (["compare", "--baseline", "preset:sglang/triton", "--candidate", "reference", "--scale-fmt", "fp32", "--fp8",
      "e4m3fnuz"], "sglang/triton supports e4m3fn only"),
    (["table", "--fixed", "preset:sglang/triton", "--fp8", "e4m3fnuz"], "sglang/triton supports e4m3fn only"),
    (["parity", "--writers", "preset:sglang/triton", "--fp8", "e4m3fnuz", "--ctx", "128"],
     "sglang/triton supports e4m3fn only"),
    (["parity", "--reader", "preset:aiter/triton", "--block", "16", "--ctx", "128"],
     "aiter/triton writes/reads the linear layout only"),
], ids=["compare", "baseline", "table", "parity-writer", "parity-reader"])
def test_a_preset_is_refused_a_spec_its_table_declares_unsupported_in_every_command(capsys, argv, reason):
    code = main([*argv, "--device", "cpu"])
    _, err = capsys.readouterr()
    assert code == 2 and err.endswith(f"error: preset:{reason}\n"), err


def test_a_bindings_from_cycle_is_named_as_a_cycle(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for this, other in (("a", "b"), ("b", "a")):
        (tmp_path / f"{this}.toml").write_text(f'[project]\nname = "{this}"\npackage = "{this}"\nversion = "1"\n'
                                               f'root = "{this}"\nbindings_from = "{other}.toml"\n')
    code = main(["compare", "--candidate", "preset:a.toml/w", "--device", "cpu"])
    _, err = capsys.readouterr()
    assert code == 2 and err == (f"fp8check: error: a.toml: bindings_from makes a cycle: {tmp_path}/a.toml ->"
                                 f" {tmp_path}/b.toml -> {tmp_path}/a.toml\n"), err


def test_a_cache_folder_that_is_a_regular_file_counts_as_no_cache(tmp_path, monkeypatch):
    import hashlib

    from fp8check.code.released import Package, read_file
    from test_released import OPS, build_wheel

    blocker = tmp_path / "cache"
    blocker.write_text("not a folder\n")
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(blocker))
    wheel = build_wheel(tmp_path / "index")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    source = read_file(Package("demo-kernels", "1.0", digest, find_links=str(tmp_path / "index")), "demo_kernels/ops.py")
    assert (source.data, source.provenance["wheel_sha256"]) == (OPS.encode(), digest)
    assert blocker.read_text() == "not a folder\n"


def available_cpu() -> int:
    from fp8check.core.cache import available_memory

    return available_memory("cpu")


HUGE = 10**15  # more bytes than any machine has: every size below is refused before an allocation


@pytest.mark.parametrize("argv, sizes", [
    (["compare", "--layers", str(10**9)], "--num-blocks 3, --block 64, --head-dim 128, --layers 1000000000"),
    (["compare", "--num-blocks", str(10**13)], "--num-blocks 10000000000000, --block 64, --head-dim 128"),
    (["compare", "--block", str(10**13)], "--num-blocks 3, --block 10000000000000, --head-dim 128"),
    (["table", "--head-dim", str(10**13)], "--num-blocks 3, --block 64, --head-dim 10000000000000"),
    (["parity", "--ctx", str(10**12)], "--ctx 1000000000000, --heads 64, --head-dim 128, --block 64, --next-n 1,"
                                       " --topk 2048, 2 writer(s)"),
    (["parity", "--ctx", "128", "--heads", str(10**12)], "--ctx 128, --heads 1000000000000, --head-dim 128,"
                                                         " --block 64, --next-n 1, --topk 2048, 2 writer(s)"),
    (["parity", "--ctx", str(10**11), "--topk", str(10**11)], "--ctx 100000000000, --heads 64, --head-dim 128,"
                                                              " --block 64, --next-n 1, --topk 100000000000,"
                                                              " 2 writer(s)"),
], ids=["layers", "blocks", "block", "head-dim", "contexts", "heads", "top-k"])
def test_every_size_is_refused_up_front_naming_its_options(capsys, argv, sizes):
    code = main([*argv, "--device", "cpu"])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith(f"fp8check: error: {sizes} (") and err.count("\n") == 1, err
    needed, available = (int(n.replace(",", "")) for n in
                         err.split(" needs ")[1].removesuffix(" available on cpu\n").split(" bytes, only "))
    assert needed > available > 0 and abs(available - available_cpu()) < available_cpu() // 2


def test_gate_cases_of_huge_sizes_are_refused_before_allocating(capsys, tmp_path, monkeypatch):
    """A gate config's sizes (a compare's num_blocks, a parity case's contexts) pass the same memory check as the
    commands' options: each case is an error naming the sizes, before anything is allocated."""
    monkeypatch.chdir(Path(__file__).parents[1])
    config = tmp_path / "huge.toml"
    config.write_text('[[case]]\ncandidate = "reference-vllm"\nnum_blocks = 1000000000000\n\n'
                      '[[case]]\nkind = "parity"\nwriters = ["reference-vllm"]\nctx = [1000000000000]\n'
                      'topk = 64\nheads = 2\nbaseline = "reference"\n')
    code = main(["gate", str(config), "--json", str(tmp_path / "g.json")])
    capsys.readouterr()
    cases = json.loads((tmp_path / "g.json").read_text())["cases"]
    assert code == 2
    assert [(c["status"], " needs " in c["error"]) for c in cases] == [("error", True), ("error", True)]


needs_clang = pytest.mark.skipif(__import__("fp8check.hip_cpu.compiler", fromlist=["find"]).find() is None,
                                 reason="no clang >= 20")
FAKE_AITER = Path(__file__).parent / "aiter_cpu" / "fake_aiter"


@needs_clang
def test_an_aiter_src_build_is_rebuilt_when_a_header_it_read_outside_the_tree_changes(capsys, tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    checkout, outside = tmp_path / "aiter", tmp_path / "elsewhere" / "rounding.h"
    shutil.copytree(FAKE_AITER, checkout)
    outside.parent.mkdir()
    outside.write_text("#define FP8CHECK_TEST_ROUND ceilf\n")  # aiter's own rounding of the ue8m0 exponent
    op = checkout / "csrc" / "kernels" / "cache_kernels.cu"
    op.write_text(f'#include "{outside}"\n' + op.read_text().replace("exp2f(ceilf(log2f(scale)))",
                                                                    "exp2f(FP8CHECK_TEST_ROUND(log2f(scale)))"))
    argv = ["compare", "--baseline", f"aiter-src:{checkout}", "--candidate", "reference", "--device", "cpu",
            "--inputs", "ue8m0-boundary", "--quiet"]
    assert main(argv) == 0
    outside.write_text("#define FP8CHECK_TEST_ROUND roundf\n")  # the tree is unchanged; what it includes is not
    assert main(argv) == 1
    _, err = capsys.readouterr()
    assert err == ""


@needs_clang
def test_a_cached_aiter_cpu_library_that_was_altered_or_left_partial_is_rebuilt(tmp_path, monkeypatch):
    from fp8check.hip_cpu import build, compiler

    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    unit = build.Unit(Path(__file__).parent / "aiter_cpu", ("wave_kernels.cu",), "wave_kernels.cu", (".",))
    first = build.build(unit, "gfx942", compiler.require())
    original = first.host_library.read_bytes()
    first.host_library.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one bit of the cached library
    with pytest.raises(build.BuildError, match=r"host.so is not the library that was built \(sha256 [0-9a-f]{64}\):"
                                               r" refused; the next run rebuilds it$"):
        first.load()
    again = build.build(unit, "gfx942", compiler.require())
    assert again.seconds > 0 and again.host_library.read_bytes() == original  # rebuilt, not trusted
    (again.host_library.parent / build.MANIFEST).unlink()  # a partial entry
    third = build.build(unit, "gfx942", compiler.require())
    assert third.seconds > 0 and third.library_sha256 == again.library_sha256
    assert build.build(unit, "gfx942", compiler.require()).seconds == 0.0  # whole again: used
    third.load()


def test_a_preset_of_a_table_that_pins_no_hash_is_refused_unless_allowed(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "mine.toml").write_text('[project]\nname = "mine"\npackage = "mine-kernels"\nversion = "1.0"\n'
                                        'root = "mine"\n[[writer]]\nname = "w"\n[[writer.step]]\nfile = "mine/ops.py"\n'
                                        'call = "write"\nargs = ["k", "cache", "slot_mapping", "quant_block_size",'
                                        ' "scale_fmt"]\n')
    argv = ["compare", "--candidate", "preset:mine.toml/w", "--block", "16", "--num-blocks", "2", "--device", "cpu"]
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert err.startswith("fp8check: error: preset:mine.toml/w: no project table pins the sha256 of mine-kernels==1.0;")
    assert main([*argv, "--allow-unpinned"]) == 2  # allowed: fetched, and no index holds it
    _, err = capsys.readouterr()
    assert "pkg:mine-kernels==1.0: pip download failed" in err
