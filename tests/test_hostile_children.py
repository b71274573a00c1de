"""Children that attack the report pipe, the deadline or the golden key (issue 24, item 5 and item 1):
none of them holds fp8check past --timeout, prints a line fp8check did not write, or signs a golden.

The hostile writers live in tests/hostile/tamper.py and tests/hostile/user_errors.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fp8check.cli import main
from fp8check.core.isolation import FRAME_MARK, parse_frames

HOSTILE = Path(__file__).parent / "hostile"
SMALL = ("--block", "16", "--head-dim", "64", "--num-blocks", "2")


def hostile(target: str) -> str:
    file_name, _, func = target.partition(":")
    return f"file:{HOSTILE / file_name}:{func}"


def against_reference(capsys, candidate: str, *options: str) -> tuple[int, str, str]:
    code = main(["compare", "--baseline", "reference", "--candidate", candidate, *SMALL, *options])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("func", ["sends_half_a_report", "grandchild_sends_half_a_report"])
def test_half_a_report_and_a_sleep_is_killed_at_the_timeout(capsys, func):
    name = hostile(f"tamper.py:{func}")
    # the direct child that returns gets a timeout far above its run (a spawned CUDA child's first kernel
    # takes seconds on a loaded machine): what is shown is that its grandchild does not hold fp8check to it
    timeout = "3" if func == "sends_half_a_report" else "60"
    start = time.monotonic()
    code, out, err = against_reference(capsys, name, "--timeout", timeout)
    elapsed = time.monotonic() - start
    if func == "sends_half_a_report":
        assert code == 2 and "did not finish within the 3 s timeout (--timeout) while writing: killed" in err, err
    else:  # the direct child returned: its grandchild's half frame is ignored, the bytes are judged
        assert code == 0 and "IDENTICAL" in out, err
    assert elapsed < 30


def test_a_grandchild_flooding_the_pipe_cannot_hold_a_writer_that_returned(capsys):
    start = time.monotonic()
    code, out, err = against_reference(capsys, hostile("tamper.py:grandchild_floods_the_pipe"), "--timeout", "60")
    assert code == 0 and "IDENTICAL: 0 of 2176 bytes differ" in out, err
    assert time.monotonic() - start < 30  # not the 60 s timeout


def test_noise_in_the_pipe_is_ignored_and_the_bytes_are_judged(capsys):
    code, out, err = against_reference(capsys, hostile("tamper.py:floods_the_pipe"))
    assert code == 1 and "DIFFERENT" in out, err  # it wrote nothing


def test_a_forged_report_prints_no_fake_line(capsys):
    name = hostile("tamper.py:forges_lines")
    code, out, err = against_reference(capsys, name)
    assert code == 2 and out == ""
    assert err == f"fp8check: error: producer {name!r} raised X while writing\n"


def test_frames_survive_noise_and_splits():
    frame = FRAME_MARK + b"%08x" % 15 + b'{"status": "a"}'
    noisy = b"junk" + frame[:5] + b"x" + frame + b"more" + frame[:-3]
    messages, rest = parse_frames(noisy)
    assert messages == [{"status": "a"}] and rest == frame[:-3]
    assert parse_frames(rest + frame[-3:]) == ([{"status": "a"}], b"")


def test_the_golden_key_never_reaches_the_child(capsys, monkeypatch):
    monkeypatch.setenv("FP8CHECK_GOLDEN_KEY", "secret")
    code, out, err = against_reference(capsys, hostile("tamper.py:reads_the_golden_key"))
    assert code == 0 and "IDENTICAL" in out, err


@pytest.mark.parametrize("isolation", [(), ("--in-process",)])
def test_an_error_in_the_users_code_names_its_file_line_and_source(capsys, isolation):
    name = hostile("user_errors.py:asserts")
    code, _, err = against_reference(capsys, name, *isolation)
    assert code == 2 and err.count("\n") == 1, err
    assert (f"producer {name!r} raised AssertionError: the writer's own assertion at {HOSTILE / 'user_errors.py'}:5:"
            " assert quant_block_size == 3, \"the writer's own assertion\"") in err


def test_debug_shows_the_users_traceback_from_the_child(capsys):
    code, _, err = against_reference(capsys, hostile("user_errors.py:asserts"), "--debug")
    assert code == 2
    child = err[err.index("In the child process:"):]
    assert f'File "{HOSTILE / "user_errors.py"}", line 9, in asserts' in child
    assert f'File "{HOSTILE / "user_errors.py"}", line 5, in _check' in child


# ---- item 3: modified inputs and stray writes fail every command alike ----------------------------------

PARITY_SMALL = ("--heads", "4", "--topk", "32", "--ctx", "20,64", "--baseline", "reference")


def test_modified_inputs_fail_the_one_verdict_line_in_quiet_json_and_the_api(capsys, tmp_path):
    from fp8check.api import compare_writers

    name = hostile("tamper.py:modifies_k")
    code, out, err = against_reference(capsys, name, "--quiet", "--json", str(tmp_path / "r.json"))
    assert code == 1, err
    assert out == f"FAIL: candidate {name!r} modified its k in place; 0 of 2176 cache bytes differ in 2 blocks\n"
    report = __import__("json").loads((tmp_path / "r.json").read_text())
    assert report["identical"] is False and report["faults"] == [f"candidate {name!r} modified its k in place"]
    result = compare_writers(name, "reference", block=16, head_dim=64, num_blocks=2)
    assert not result.passed and not result.identical and "modified its k in place" in result.verdict


def test_stray_writes_by_both_sides_are_never_identical(capsys):
    name = hostile("stray.py:after_1")
    code, out, err = run_cli(capsys, "compare", "--baseline", name, "--candidate", name, *SMALL, "--quiet")
    assert code == 1, err
    assert out == (f"FAIL: baseline {name!r} wrote 1 bytes outside the cache; candidate {name!r} wrote 1 bytes"
                   " outside the cache; 0 of 2176 cache bytes differ in 2 blocks\n")


def test_a_table_whose_fixed_writer_modifies_its_inputs_fails(capsys):
    name = hostile("tamper.py:modifies_k")
    code, out, err = run_cli(capsys, "table", "--baseline", "reference", "--fixed", name, *SMALL, "--quiet")
    assert code == 1, err
    assert out == (f"FAIL: candidate {name!r} modified its k in place; the fixed wrapper matches byte for byte;"
                   " the buggy wrapper differs\n")


@pytest.mark.parametrize("func, fault", [("tamper.py:modifies_slot_mapping", "modified its slot_mapping in place"),
                                         ("stray.py:before_1", "wrote 1 bytes outside the cache")])
def test_parity_fails_a_writer_that_modifies_its_inputs_or_writes_outside(capsys, func, fault):
    name = hostile(func)
    code, out, err = run_cli(capsys, "parity", *PARITY_SMALL, "--writers", f"reference,{name}")
    assert code == 1, out + err
    assert f"FAIL: writer {name!r} {fault}" in " ".join(out.split())


def test_a_gate_case_whose_candidate_modifies_its_inputs_fails(capsys, tmp_path):
    name = hostile("tamper.py:modifies_k")
    config = tmp_path / "gate.toml"
    config.write_text(f'[defaults]\nblock = 16\nhead_dim = 64\nnum_blocks = 2\n[[case]]\ncandidate = "{name}"\n'
                      'baseline = "reference"\n')
    code, out, err = run_cli(capsys, "gate", config, "--quiet")
    assert code == 1, out + err


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_forged_description_is_shown_as_one_literal_line(capsys):
    code, out, err = against_reference(capsys, hostile("tamper.py:forges_a_description"))
    assert code == 0, err  # its bytes are correct: the verdict is the bytes'
    assert "\x1b" not in out and "\r" not in out
    assert "[bold red]evil[/bold red]\\x1b[2J" in out  # markup and escape shown literally
    assert [line for line in out.splitlines() if "IDENTICAL" in line] == ["IDENTICAL: 0 of 2176 bytes differ in 2 blocks"]


def test_half_a_frame_followed_by_a_whole_one_loses_only_the_half():
    frame = FRAME_MARK + b"%08x" % 15 + b'{"status": "a"}'
    half = FRAME_MARK + b"00000100" + b'{"status": '
    assert parse_frames(half + frame) == ([{"status": "a"}], b"")
    assert parse_frames(half) == ([], half)  # it may still be completed


@pytest.mark.parametrize("target, where", [
    ("syntax_error.py:writer", f"{HOSTILE / 'syntax_error.py'}:3: return ("),
    ("../plugins/fails_to_import.py:writer", "fails_to_import.py:3: raise ImportError(\"this plugin is deliberately broken\")"),
])
def test_a_file_that_fails_to_import_names_the_line(capsys, target, where):
    code, _, err = against_reference(capsys, hostile(target))
    assert code == 2 and err.count("\n") == 1 and "failed to import" in err, err
    assert err.rstrip().endswith(where), err


def test_a_childs_error_text_cannot_put_html_into_the_markdown_summary(capsys, tmp_path):
    summary = tmp_path / "summary.md"
    code, _, err = against_reference(capsys, hostile("tamper.py:raises_html"), "--markdown", str(summary))
    assert code == 2, err
    outside, fenced = [], False  # inside a ``` block the text is shown literally
    for line in summary.read_text().splitlines():
        fenced = not fenced if line.strip() == "```" else fenced
        if not fenced:
            outside.append(line)
    assert "<h1>" not in "\n".join(outside) and "&lt;h1&gt;PASS&lt;/h1&gt;" in "\n".join(outside)
