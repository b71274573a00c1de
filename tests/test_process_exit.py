"""The console script ends its process without the interpreter's teardown (cli.startup.exit_process): what
the outside world sees must be exactly what a full exit gives. Each test runs fresh processes, one with
FP8CHECK_FULL_EXIT=1 (the interpreter's usual teardown) as the independent reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# a process that leaves output in every buffer a teardown would flush: Python's stdout (piped, so block
# buffered), C's stdout (printf, block buffered too), a thread still running, and an atexit handler
PROBE = r"""
import atexit, ctypes, sys, threading, time
from fp8check.cli.startup import exit_process

def late():
    time.sleep(0.3)
    print("thread done")

threading.Thread(target=late).start()
atexit.register(lambda: print("atexit ran"))
print("python buffered", end=" ")
ctypes.CDLL(None).printf(b"from C\n")
exit_process(int(sys.argv[1]))
"""


def _run(argv: list[str], full: bool, cwd: Path | None = None) -> subprocess.CompletedProcess:
    # PYTHONUNBUFFERED would make both Python's and C's stdout unbuffered, and nothing would be left to flush
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    env.update(PYTHONPATH=str(ROOT), FP8CHECK_FULL_EXIT="1" if full else "")
    return subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize("code", [0, 1, 3])
def test_exit_process_keeps_the_code_every_buffer_the_threads_and_atexit(code):
    fast, full = _run(["-c", PROBE, str(code)], full=False), _run(["-c", PROBE, str(code)], full=True)
    assert fast.returncode == full.returncode == code
    assert fast.stderr == full.stderr == ""
    # C's buffer is flushed at the very end in both (after Python's), so the lines compare as a set
    assert sorted(fast.stdout.split()) == sorted(full.stdout.split()) == sorted(
        "python buffered thread done atexit ran from C".split())


@pytest.mark.parametrize("argv, code", [
    (["compare", "--block", "16", "--head-dim", "64"], 0),
    (["compare", "--block", "16", "--head-dim", "64", "--candidate", "triton-buggy"], 1),
    (["compare", "--block", "0"], 2),
])
def test_the_console_script_prints_and_writes_what_a_full_exit_does(tmp_path, argv, code):
    """`python -m fp8check` (the console script's entry) with stdout piped: the same exit code, the same
    stdout and stderr, the same JSON report (but its stage timings) as the same run with the usual
    teardown."""
    runs = {}
    for full in (False, True):
        report = tmp_path / f"report-{full}.json"
        extra = ["--json", str(report)] if code != 2 else []
        done = _run(["-m", "fp8check", *argv, *extra], full=full, cwd=tmp_path)
        payload = None
        if report.exists():
            raw = report.read_bytes()
            assert raw.endswith(b"}\n"), raw[-40:]  # written to its end
            payload = json.loads(raw)
            payload["run"].pop("timings_s")
        runs[full] = (done.returncode, done.stdout, done.stderr, payload)
    assert runs[False] == runs[True]
    returncode, stdout, stderr, report = runs[False]
    assert returncode == code
    if code == 2:
        assert stdout == "" and stderr.count("\n") == 1 and "--block" in stderr and report is None
    else:
        assert report["passed"] is (code == 0) and stdout.strip()


def test_main_returns_in_process_and_only_the_entry_ends_it(capsys):
    """The tests' and the API callers' main() returns its code; entry() is what ends the process."""
    from fp8check.cli import entry, main

    assert main(["compare", "--block", "16", "--head-dim", "64", "--quiet"]) == 0
    capsys.readouterr()
    assert entry.__module__ == "fp8check.cli"
    from importlib.metadata import entry_points

    scripts = [ep.value for ep in entry_points(group="console_scripts") if ep.name == "fp8check"]
    assert scripts == ["fp8check.cli:entry"]
