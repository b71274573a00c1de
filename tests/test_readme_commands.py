"""Every `fp8check` command the README shows in a code block runs as written: a verdict (exit 0 or 1),
never a usage error. Commands naming other repositories (`git:BEFORE:`, `git:origin/main:`, a checkout
at `../aiter`) need those repositories, and `fp8check gate ecosystem` downloads released wheels (its offline
subset is tests/test_ecosystem.py's): they are left out; the rest run from a folder that holds the files
they name."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_blocks() -> list[list[str]]:
    """The `fp8check` commands of each shell block, in order (a later one may use an earlier one's file)."""
    blocks, language = [], None  # language: None outside a fenced block
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            language = line[3:].strip() if language is None else None
            blocks.append([])
        elif language in ("", "sh", "bash", "console"):
            line = line.strip().removeprefix("$ ")
            if line.startswith("fp8check ") and not any(x in line for x in ("git:", ":../", "ecosystem")):
                blocks[-1].append(line.split("  #")[0].strip())
    return [block for block in blocks if block]


def test_the_readme_shows_commands():
    assert sum(map(len, readme_blocks())) >= 8


@pytest.mark.parametrize("block", readme_blocks(), ids=lambda block: block[0][:60])
def test_the_readme_commands_run_as_written(block, tmp_path):
    for name in ("configs", "examples", "tests", "fp8check"):
        (tmp_path / name).symlink_to(ROOT / name)
    for command in block:
        done = subprocess.run([sys.executable, "-m", "fp8check", *shlex.split(command)[1:]],
                              capture_output=True, text=True, cwd=tmp_path, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode in (0, 1), f"{command}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "error:" not in done.stderr, done.stderr[-2000:]


def test_the_writer_contract_gives_the_blocks_byte_layout():
    """Where the README tells users to write their own writer, it says where each byte of a block goes."""
    text = (ROOT / "README.md").read_text()
    contract = text[text.index("**Your function**"):text.index("**A vLLM source file as it is**")]
    for fact in ("value region", "scale region", "block_size*head_dim + 4*(t*head_dim/qbs + j)", "t*head_dim + d",
                 "(t//16)*16*head_dim + (d//16)*256 + (t%16)*16 +"):
        assert fact in contract, fact
