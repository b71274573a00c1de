"""Every `fp8check` command the README and the pages of docs/ show in a shell block runs as written: a
verdict (exit 0 or 1), never a usage error. Left out, each for the reason LEFT_OUT gives: commands
naming other repositories (`git:BEFORE:`, `git:origin/main:`, a checkout at `../aiter`) need those
repositories; `fp8check gate ecosystem` and `pkg:` / `preset:` names download released wheels (the offline
subset is tests/test_ecosystem.py's); `--device cuda` needs a CUDA GPU (it runs where one is); aiter's
own op and the recordings made of it need a ROCm GPU with aiter. The rest run from a folder that holds
the files they name, in order within a block (a later one may use an earlier one's file)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NEEDS_CUDA = "needs a CUDA GPU"
LEFT_OUT = {
    "git:": "reads a revision of another repository",
    ":../": "names a checkout of another repository",
    "ecosystem": "downloads released wheels",
    "pkg:": "downloads a released wheel",
    "preset:": "downloads a released wheel",
    "--producer aiter": "needs a ROCm GPU with aiter",
    "golden:tests/golden/aiter": "replays a recording made on a ROCm GPU",
    "--device cuda": NEEDS_CUDA,
}


def left_out(command: str) -> str | None:
    """Why a shown command cannot run here, or None."""
    if any(not (ROOT / path).exists() for path in re.findall(r"\.sources/[\w.-]+", command)):
        return "needs a source its block fetches into .sources/ first"
    for marker, reason in LEFT_OUT.items():
        if marker in command and not (reason == NEEDS_CUDA and torch.cuda.is_available()):
            return reason
    return None


def shell_commands(page: Path) -> list[list[str]]:
    """The `fp8check` commands of each shell block of a page, continuation lines joined, in order."""
    blocks, language, pending = [], None, ""  # language: None outside a fenced block
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            language = line[3:].strip() if language is None else None
            blocks.append([])
            continue
        if language not in ("", "sh", "bash", "console"):
            continue
        line = pending + line.strip().removeprefix("$ ")
        pending = line[:-1] + " " if line.endswith("\\") else ""
        if not pending and line.startswith("fp8check ") and not left_out(line):
            blocks[-1].append(line.split("  #")[0].strip())
    return [block for block in blocks if block]


def shown_blocks() -> list:
    return [pytest.param(block, id=f"{page.name}:{block[0][:60]}") for page in PAGES for block in shell_commands(page)]


def test_the_readme_and_the_docs_show_commands():
    assert len(shell_commands(ROOT / "README.md")) >= 2
    assert sum(len(block) for page in PAGES for block in shell_commands(page)) >= 20


def test_the_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("block", shown_blocks())
def test_the_shown_commands_run_as_written(block, tmp_path):
    for name in ("configs", "examples", "tests", "fp8check", ".sources"):
        if (ROOT / name).exists():
            (tmp_path / name).symlink_to(ROOT / name)
    for command in block:
        done = subprocess.run([sys.executable, "-m", "fp8check", *shlex.split(command)[1:]],
                              capture_output=True, text=True, cwd=tmp_path, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode in (0, 1), f"{command}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "error:" not in done.stderr, done.stderr[-2000:]


def test_the_writer_contract_gives_the_blocks_byte_layout():
    """Where the docs tell users to write their own writer, they say where each byte of a block goes."""
    text = (ROOT / "docs" / "producers.md").read_text()
    contract = text[text.index("**Your function**"):text.index("**A vLLM source file as it is**")]
    for fact in ("value region", "scale region", "block_size*head_dim + 4*(t*head_dim/qbs + j)", "t*head_dim + d",
                 "(t//16)*16*head_dim + (d//16)*256 + (t%16)*16 +"):
        assert fact in contract, fact
