"""The HTML report as text: one self-contained page from every command, where the diagnosis' bytes are, and
a gate's grid. What a browser shows of it is tests/test_html_browser.py's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import run
from fp8check.cli import cli
from fp8check.run.compare import check_compare
from fp8check.core.errors import ExitCode
from fp8check.core.inputs import generate
from fp8check.diagnose import Category
from fp8check.core.outcome import Outcome, Outcomes, single
from fp8check.report import html
from fp8check.core.spec import CacheSpec
from fp8check.core.views import CellMap
from fp8check.producers import registry

FAULTS = Path(__file__).parent / "faults"
ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_takes_html(command):
    assert "--html PATH|-" in cli.commands[command].get_help(cli.make_context("fp8check", [command, "--help"],
                                                                               resilient_parsing=True))


def test_the_page_needs_nothing_from_outside(capsys, tmp_path):
    page = tmp_path / "r.html"
    code, _, err = run(capsys, "compare", "--candidate", f"file:{FAULTS / 'transposed_tile.py'}:writer",
                       "--baseline", "reference", "--html", str(page), "--quiet")
    assert code == 1, err
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 3  # one byte map per block
    assert not re.search(r"<script|<link|<iframe|@import|@font-face|url\((?!#)", text, re.IGNORECASE)  # url(#id): a clip path of the page
    # every reference is to the page itself or data inside it (XML namespaces name, they do not load)
    for ref in re.findall(r'(?:href|src)="([^"]*)"', text):
        assert ref.startswith(("#", "data:")), ref
    without_namespaces = re.sub(r'xmlns(:\w+)?="[^"]*"', "", text)  # XML namespaces name things, load nothing
    assert "http://" not in without_namespaces and "https://" not in without_namespaces


def test_html_to_stdout_is_the_only_thing_there(capsys):
    code, out, err = run(capsys, "compare", "--block", "16", "--head-dim", "64", "--num-blocks", "2", "--html", "-")
    assert code == 0
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    assert "IDENTICAL: 0 of 2176 bytes differ in 2 blocks" in out and "IDENTICAL" in err


def test_an_error_replaces_the_page(capsys, tmp_path):
    page = tmp_path / "r.html"
    page.write_text("an earlier run's passing page")
    code, _, _ = run(capsys, "compare", "--candidate", "no-such-writer", "--html", str(page))
    assert code == ExitCode.USAGE
    text = page.read_text()
    assert "ERROR: " in text and "no-such-writer" in text and "passing" not in text


def test_drawing_libraries_load_only_for_a_page():
    probe = ("import sys; from fp8check.cli import main; main(['compare', '--device', 'cpu', '--quiet']);"
             " print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip().endswith("False")


def _compare(candidate: str, spec: CacheSpec, **options):
    data = generate(spec, seed=0, **options.pop("inputs", {}))
    return check_compare(spec, baseline=registry.resolve("reference"), inputs=data, device=torch.device("cpu"),
                         candidate=registry.resolve(f"file:{FAULTS / candidate}.py:writer"), **options)


@pytest.mark.parametrize("fault", ["slot_shift", "skip_tokens", "transposed_tile"])
def test_located_bytes_are_the_differing_bytes(fault):
    spec = CacheSpec(num_blocks=6, block_size=64, head_dim=128)
    check = _compare(fault, spec)
    base = check.result.baseline.buffer.flat
    cand = check.result.candidate.buffer.flat
    differs = base != cand  # [blocks, block_bytes], computed here, not by the diff
    located = check.diagnosis.located
    assert torch.equal(located.per_block.sum(dim=1), differs.sum(dim=1))
    first = torch.nonzero(differs.any(dim=1)).view(-1)[:4]
    assert located.shown_blocks == tuple(first.tolist())
    expected = torch.nonzero(differs[first].reshape(-1)).view(-1)
    expected = (first.view(-1, 1) * spec.block_bytes + torch.arange(spec.block_bytes)).reshape(-1)[expected]
    assert torch.equal(located.shown_bytes, expected)
    # each category's bytes add up to its cause's, over the blocks and over the cache
    by_category = {c.category: c.bytes for c in check.diagnosis}
    for k, category in enumerate(Category):
        assert int(located.per_block[:, k].sum()) == by_category.get(category, 0)


def test_a_map_counts_what_it_colours_and_a_page_is_the_same_every_time():
    spec = CacheSpec(num_blocks=3, block_size=64, head_dim=128)
    check = _compare("slot_shift", spec)
    maps = [v for v in check.views() if isinstance(v, CellMap)]
    assert [m.name for m in maps] == ["block-0", "block-1", "block-2"]
    located = check.diagnosis.located
    for block, picture in enumerate(maps):
        codes = located.shown_codes[(located.shown_bytes // spec.block_bytes) == block]
        expected = {c.value: int((codes == k).sum()) for k, c in enumerate(Category) if bool((codes == k).any())}
        assert picture.counts() == expected
    assert html.render(single("compare", check, 0.0)) == html.render(single("compare", check, 0.0))


def test_the_blocks_a_user_picks_are_mapped_byte_by_byte_differing_or_not():
    from fp8check.core.inputs import SlotPattern

    spec = CacheSpec(num_blocks=12, block_size=64, head_dim=128)
    check = _compare("skip_tokens", spec, map_blocks=(10, 1, 4), inputs={"slots": SlotPattern.SPARSE})
    differs = (check.result.baseline.buffer.flat != check.result.candidate.buffer.flat).sum(dim=1)
    assert differs[1] == 0 and differs[4] > 0  # sparse slots: some blocks hold no token, so nothing differs there
    located = check.diagnosis.located
    assert located.shown_blocks == (1, 4, 10)
    maps = {v.name: v for v in check.views() if isinstance(v, CellMap)}
    assert set(maps) == {"blocks", "block-1", "block-4", "block-10"}
    for block in (1, 4, 10):
        assert sum(maps[f"block-{block}"].counts().values()) == int(differs[block])


def test_a_block_outside_the_cache_cannot_be_picked(capsys):
    code, _, err = run(capsys, "compare", "--map-blocks", "0,3")
    assert code == ExitCode.USAGE
    assert err == "fp8check: error: --map-blocks 3: the cache has 3 blocks (0-2)\n"


def test_gate_grid_shows_skips_and_their_reasons():
    def outcome(i: int, inputs: str, skipped: bool) -> Outcome:
        return Outcome(f"case-{i}", "compare", ExitCode.OK, None, "no GPU here" if skipped else "x", 0.0,
                       skipped=skipped, axes=(("kind", "compare"), ("inputs", inputs), ("fp8", "e4m3fn")))

    run_ = Outcomes("gate t", (outcome(0, "normal", True), outcome(1, "ties", True)), 2, 0.0)
    page = html.render(run_)
    assert page.count('<td class="cell skipped">') == 2
    assert "<li>2 skipped: no GPU here</li>" in page
    assert 'href="#case-0"' in page and 'id="case-0"' in page and 'id="case-1"' in page


def test_a_table_page_maps_each_column_that_differs_under_its_name(capsys, tmp_path):
    # e4m3fnuz: both wrappers differ from aiter's numerics (integer-cast, and the divisor's scale-ratio)
    page = tmp_path / "t.html"
    code, _, err = run(capsys, "table", "--fp8", "e4m3fnuz", "--html", str(page), "--quiet")
    assert code == 1, err
    text = page.read_text()
    assert re.findall(r'<caption>(\w+) column: causes', text) == ["BUGGY", "FIXED"]
    assert re.findall(r'class="cellmap" id="case-0-(\w+)-block-0"', text) == ["buggy", "fixed"]
    buggy, fixed = text.split('<caption>FIXED column: causes')
    assert "integer-cast" in buggy.split("<caption>BUGGY column: causes")[1] and "scale-ratio" in fixed
