"""The HTML report in a real browser (headless Chromium): no console errors, maps whose cells are the
differing bytes in the colours of their causes, a gate grid whose every cell leads to its case. Each page
is kept as a screenshot under build/screenshots/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from browser import READ_CELLS, Opened, browser, unavailable
from conftest import run
from fp8check.core.inputs import generate
from fp8check.core.spec import CacheSpec
from fp8check.core.reference import aiter_writer

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")

FAULTS = Path(__file__).parent / "faults"
SPEC = CacheSpec(num_blocks=3, block_size=64, head_dim=128)  # the command's defaults: shuffle layout, ue8m0


@pytest.fixture(scope="module")
def chrome():
    with browser() as launched:
        yield launched


def fault(name: str) -> str:
    return f"file:{FAULTS / name}.py:writer"


def compare_page(capsys, tmp_path, name: str, *argv: str) -> tuple[Path, dict]:
    """`fp8check compare ARGV --html` and its --json, both of one run (exit 1: the bytes differ)."""
    page, data = tmp_path / f"{name}.html", tmp_path / f"{name}.json"
    code, _, err = run(capsys, "compare", *argv, "--html", str(page), "--json", str(data), "--quiet")
    assert code == 1, err
    return page, json.loads(data.read_text())


def picture(opened: Opened, block: int) -> tuple[dict, torch.Tensor]:
    """(the map's data attributes, its cells as an int [rows, columns, 4] RGBA tensor, read from the pixels)."""
    selector = f"figure.cellmap[id$='-block-{block}']"
    cells = opened.cells(selector)
    figure = opened.page.locator(selector)
    attrs = {k: figure.get_attribute(f"data-{k}") for k in ("rows", "columns", "counts", "colours", "none")}
    rgba = torch.tensor(cells["rgba"], dtype=torch.int64).view(cells["height"], cells["width"], 4)
    return attrs, rgba


def rgb(hex_colour: str) -> torch.Tensor:
    return torch.tensor([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=torch.int64)


def painted(rgba: torch.Tensor, hex_colour: str) -> torch.Tensor:
    """bool [rows, columns]: cells of this colour."""
    return (rgba[..., :3] == rgb(hex_colour)).all(dim=-1)


def shuffle_rows(blocks: torch.Tensor) -> torch.Tensor:
    """uint8 [n, 64, 132]: each token's row (128 values by dim, then its 4 scale bytes) of shuffle-layout
    blocks [n, 8448], from SPEC.md section 2's formulas."""
    t = torch.arange(64).view(-1, 1)
    d = torch.arange(128).view(1, -1)
    values = (t // 16) * 16 * 128 + (d // 16) * 256 + (t % 16) * 16 + d % 16
    scales = 64 * 128 + 4 * t + torch.arange(4).view(1, -1)
    return blocks[:, torch.cat([values, scales], dim=1)]


def written(writer, spec: CacheSpec) -> torch.Tensor:
    """uint8 [num_blocks, block_bytes]: what a writer writes on the command's default inputs."""
    data = generate(spec, seed=0)
    cache = torch.zeros(spec.num_blocks, spec.block_size, spec.row_bytes, dtype=torch.uint8)
    writer(data.k, cache, data.slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg)
    return cache.view(spec.num_blocks, -1)


def check_counts(attrs: dict, rgba: torch.Tensor, payload: dict, block: int) -> None:
    """The picture's cells per colour are the figure's counts, and its differing cells the diff's."""
    counts, colours = json.loads(attrs["counts"]), json.loads(attrs["colours"])
    assert rgba.shape[:2] == (int(attrs["rows"]), int(attrs["columns"])) == (64, 132)
    for category, n in counts.items():
        assert int(painted(rgba, colours[category]).sum()) == n, category
    background = int(painted(rgba, attrs["none"]).sum())
    assert 64 * 132 - background == sum(counts.values()) == payload["value_diff"][block] + payload["scale_diff"][block]


def test_seed_bug_map_is_every_differing_byte_in_the_integer_cast_colour(chrome, capsys, tmp_path):
    page, payload = compare_page(capsys, tmp_path, "seed-bug", "--candidate", "triton-buggy")
    opened = Opened(chrome, page)
    assert opened.errors == []
    assert opened.page.locator("figure.cellmap").count() == 3  # 3 blocks, each its byte map (no heat map)
    for block in range(3):
        attrs, rgba = picture(opened, block)
        check_counts(attrs, rgba, payload, block)
        assert set(json.loads(attrs["counts"])) == {"integer-cast"}
        assert int(rgba[:, 128:].ne(0).any(dim=-1).sum()) == 64 * 4  # scale bytes are drawn, none differs
        assert bool(painted(rgba[:, 128:], attrs["none"]).all())
    opened.screenshot("compare-seed-bug")
    opened.close()


def test_transposed_tile_map_shows_the_tiles_diagonals_in_place(chrome, capsys, tmp_path):
    page, payload = compare_page(capsys, tmp_path, "transposed-tile", "--candidate", fault("transposed_tile"),
                                 "--baseline", "reference")
    from importlib.util import module_from_spec, spec_from_file_location

    loaded = spec_from_file_location("transposed_tile", FAULTS / "transposed_tile.py")
    module = module_from_spec(loaded)
    loaded.loader.exec_module(module)
    expected = shuffle_rows(written(aiter_writer, SPEC)) != shuffle_rows(written(module.writer, SPEC))
    opened = Opened(chrome, page)
    assert opened.errors == []
    t, d = torch.arange(64).view(-1, 1), torch.arange(128).view(1, -1)
    for block in range(3):
        attrs, rgba = picture(opened, block)
        check_counts(attrs, rgba, payload, block)
        shown = ~painted(rgba, attrs["none"])
        assert torch.equal(shown, expected[block])  # cell by cell, the bytes that differ
        # a transposed 16x16 tile keeps its diagonal: no value byte with t % 16 == d % 16 differs
        assert not bool(shown[:, :128][(t % 16 == d % 16).expand(64, 128)].any())
        assert not bool(shown[:, 128:].any())  # the scales are right
    opened.screenshot("compare-transposed-tile")
    opened.close()


def test_slot_shift_map_shows_every_differing_row_as_the_shift(chrome, capsys, tmp_path):
    page, payload = compare_page(capsys, tmp_path, "slot-shift", "--candidate", fault("slot_shift"),
                                 "--baseline", "reference", "--layout", "shuffle")
    opened = Opened(chrome, page)
    assert opened.errors == []
    attrs, rgba = picture(opened, 0)
    check_counts(attrs, rgba, payload, 0)
    colours = json.loads(attrs["colours"])
    # one cause for the whole picture: every differing byte of every row (slot 0, which nobody writes after
    # the shift, included) is the shift's
    assert set(json.loads(attrs["counts"])) == {"shift"}
    shifted = painted(rgba, colours["shift"])
    assert bool(shifted[0].all()) and int(shifted.sum()) == payload["value_diff"][0] + payload["scale_diff"][0]
    for block in (1, 2):
        check_counts(*picture(opened, block), payload, block)
    opened.screenshot("compare-slot-shift")
    opened.close()


def test_heat_map_has_a_cell_per_block(chrome, capsys, tmp_path):
    page, payload = compare_page(capsys, tmp_path, "heat", "--candidate", fault("skip_tokens"), "--baseline",
                                 "reference", "--num-blocks", "12", "--slots", "sparse")
    opened = Opened(chrome, page)
    assert opened.errors == []
    heat = opened.page.locator("figure.cellmap[id$='-blocks']")
    cells = heat.evaluate(READ_CELLS)
    rgba = torch.tensor(cells["rgba"]).view(cells["height"], cells["width"], 4)
    assert (cells["height"], cells["width"]) == (1, 12) and heat.get_attribute("data-cells") == "12"
    differing = [v + s > 0 for v, s in zip(payload["value_diff"], payload["scale_diff"])]
    lit = ~painted(rgba, heat.get_attribute("data-none"))[0]
    assert lit.tolist() == differing and True in differing and False in differing
    assert opened.page.locator("figure.cellmap").count() == 1 + 4  # the heat map, the first 4 differing blocks
    opened.screenshot("compare-heat-map")
    opened.close()


def test_gate_grid_links_every_case_to_its_section(chrome, capsys, tmp_path):
    config = tmp_path / "small.toml"
    config.write_text(f"""
[defaults]
device = "cpu"
num_blocks = 2
[[case]]
baseline = "reference"
candidate = ["reference-vllm", "{fault('transposed_tile')}"]
slots = ["sequential", "shuffled"]
inputs = ["normal", "ties", "tiny"]
""")
    page = tmp_path / "gate.html"
    code, _, err = run(capsys, "gate", str(config), "--html", str(page), "--quiet")
    assert code == 1, err
    opened = Opened(chrome, page)
    assert opened.errors == []
    links = opened.page.locator("table.grid a")
    assert links.count() == 12
    targets = [links.nth(i).get_attribute("href") for i in range(12)]
    assert len(set(targets)) == 12
    for target in targets:
        assert opened.page.locator(f"section{target}").count() == 1
    columns = opened.page.locator("table.grid thead th").all_inner_texts()
    assert columns[1:] == ["normal", "ties", "tiny"]  # the parameter with most values
    # the transposed tile fails wherever it runs; its cells are red and its sections hold its maps
    failed = opened.page.locator("table.grid td.failed a")
    assert failed.count() == 6
    for i in range(6):
        section = opened.page.locator(f"section{failed.nth(i).get_attribute('href')}")
        assert section.locator("figure.cellmap").count() == 2
    opened.screenshot("gate")
    opened.screenshot("gate-grid", "table.grid")
    opened.close()


def test_parity_plot_has_a_line_per_writer(chrome, capsys, tmp_path):
    page = tmp_path / "parity.html"
    code, _, err = run(capsys, "parity", "--ctx", "256,512,1024", "--topk", "256", "--heads", "4", "--writers",
                       f"reference-vllm,{fault('transposed_tile')}", "--expect-fail", fault("transposed_tile"),
                       "--html", str(page), "--quiet")
    assert code == 0, err
    opened = Opened(chrome, page)
    assert opened.errors == []
    plot = opened.page.locator("figure.curves")
    assert plot.get_attribute("data-series") == "2"
    assert "vacuous" in plot.inner_text()  # ctx 256 <= K: shaded and named in the legend
    assert "FAIL, as expected" in opened.page.locator("table").first.inner_text()
    opened.screenshot("parity")
    opened.close()


def test_ecosystem_grid_marks_known_differences_and_says_why_a_run_was_skipped(chrome, capsys, tmp_path):
    page = tmp_path / "ecosystem.html"
    config = Path(__file__).parent / "projects" / "ecosystem-ci.toml"
    code, _, err = run(capsys, "gate", str(config), "--html", str(page), "--quiet")
    assert code == 0, err
    opened = Opened(chrome, page)
    assert opened.errors == []
    grid = opened.page.locator("table.grid")
    assert grid.locator("a").count() == 13  # every case of the offline matrix
    assert grid.locator("td.known a").count() == 3  # the declared upstream differences, shown as such
    assert grid.locator("td.passed a").count() == 9 and grid.locator("td.skipped a").count() == 1
    assert "1 skipped: " in opened.page.locator("ul.skips").inner_text()
    assert "linear layout only" in opened.page.locator("ul.skips").inner_text()
    opened.screenshot("ecosystem-grid", "table.grid")
    opened.close()

