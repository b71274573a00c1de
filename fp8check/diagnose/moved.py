"""Stage 1b: right bytes at the wrong place: rows, value rows or scale words shifted by k slots or tokens
(whole units), and value bytes moved the same way in every block (byte by byte). Found by matching, never by
guessing: the move that explains most of a probe is kept, and a byte is taken only when it is exactly what
the moved writer leaves there."""

from __future__ import annotations

import torch

from .claims import Claim, note, unit_claim
from .frame import Frame
from .model import Category
from ..core.spec import Layout

PROBE_UNITS = 256  # differing units compared at every offset to find the one the writer used
MIN_UNITS = 2  # whole quant groups a move needs (equal rows of qbs bytes: no chance coincidence, but two)
MIN_WORDS = 4  # scale words a scale-only move needs: ue8m0 words repeat often
SCALE_SHARE = 0.9  # share of the probe's differing scale words a scale-only shift must explain
TILE = 16  # the shuffle layout's tiles are 16 tokens x 16 dims (docs/NUMERICS.md)
RUN = 8  # value bytes matched as one run: 8 equal codes at another place are no coincidence
STRIDES = (1, -1, TILE, -TILE)  # the baseline's runs: along a row or a column of a tile, either way
PROBE_BLOCKS = 16  # fully mapped differing blocks whose runs are matched


def _slot_tables(frame: Frame) -> tuple[torch.Tensor, torch.Tensor]:
    """(first frame unit of each cache slot or -1 where its block is not in the frame, first frame unit of
    each token's slot or -1)."""
    spec, device = frame.spec, frame.blocks.device
    first = torch.arange(0, frame.n_u.numel(), spec.groups_per_token, device=device)  # each slot's first unit
    slot = frame.blocks[frame.block_i[first]] * spec.block_size + frame.token[first]
    at_slot = torch.full((spec.num_slots,), -1, dtype=torch.int64, device=device)
    at_slot[slot] = first
    of_token = torch.full((frame.k.shape[0],), -1, dtype=torch.int64, device=device)
    mapped = frame.source[first] >= 0
    of_token[frame.source[first][mapped]] = first[mapped]
    return at_slot, of_token


def _sources(frame: Frame, tables, units: torch.Tensor, by: str, k) -> tuple[torch.Tensor, torch.Tensor]:
    """(the frame units whose baseline rows a writer that moved everything by k slots (or k tokens) leaves at
    `units`, -1 where it moves nothing there and the poison stays; bool: that is known, the source lies in a
    block the frame holds). k: an int, or an int64 [m, 1] of offsets: then [m, n] for all of them."""
    at_slot, of_token = tables
    spec = frame.spec
    if by == "slots":
        slot = frame.blocks[frame.block_i[units]] * spec.block_size + frame.token[units] - k
        inside = (slot >= 0) & (slot < spec.num_slots)
        first = at_slot[slot.clamp(0, spec.num_slots - 1)]
        known = ~inside | (first >= 0)
        moved_in = inside & (first >= 0) & (frame.source[first.clamp(min=0)] >= 0)
    else:  # the slot of token T holds token T + k's row
        token = frame.source[units] + k
        inside = (frame.source[units] >= 0) & (token >= 0) & (token < of_token.numel())
        first = of_token[token.clamp(0, of_token.numel() - 1)]
        moved_in = known = inside & (first >= 0)
    return torch.where(moved_in, first + frame.group[units], -1), known


def _fingerprints(rows: torch.Tensor) -> torch.Tensor:
    """int64 [n]: one number per uint8 row, equal for equal rows (the probe counts with them; every unit a move
    takes is then compared byte by byte)."""
    words = rows.contiguous().view(torch.int64) if rows.shape[1] % 8 == 0 else rows.long()
    odd = torch.arange(1, 2 * words.shape[1], 2, device=rows.device, dtype=torch.int64) * 0x2545F491
    return (words * odd).sum(dim=1)  # wraps around: fine for a fingerprint


def shifted(frame: Frame) -> tuple[list[Claim], torch.Tensor]:
    """Whole rows, value rows or scale words stored k slots (or k tokens) away from where the baseline stores
    them. Takes every differing byte of a unit the move explains (a unit with a moved scale: its values too,
    as a wrong scale moves every value of its group). Returns (claims, units taken: bool [U])."""
    differs = (frame.n_u > 0) | (frame.wdiff_u > 0)
    open_units = torch.nonzero(differs).view(-1)
    if open_units.numel() < MIN_UNITS:
        return [], torch.zeros_like(differs)
    probe = open_units[torch.linspace(0, open_units.numel() - 1, min(PROBE_UNITS, open_units.numel()),
                                      device=open_units.device).long().unique()]
    tables = _slot_tables(frame)
    word_differs = frame.wdiff_u[probe] > 0
    # the window of offsets tried: every offset up to two blocks (16 slots at least), both ways
    reach = min(max(2 * frame.spec.block_size + 1, 16), frame.spec.num_slots - 1)
    offsets = [k for k in range(-reach, reach + 1) if k]
    k = torch.tensor(offsets, device=probe.device).view(-1, 1)
    moves = {by: _sources(frame, tables, probe, by, k) for by in ("slots", "tokens")}  # [offsets, probe] each
    # the baseline rows of every source unit, gathered and fingerprinted once
    every = torch.unique(torch.cat([s[0].clamp(min=0).view(-1) for s in moves.values()]))
    base_prints = _fingerprints(frame.value_rows(frame.base_phys, every))
    base_words = frame.base_wb.contiguous().view(torch.int32).view(-1)
    cand_prints = _fingerprints(frame.value_rows(frame.cand_phys, probe))
    cand_word = frame.cand_wb[probe].contiguous().view(torch.int32).view(-1)
    scores = {"rows": {}, "values": {}, "scales": {}}  # what -> (by, k) -> probe units it explains
    for by, src in moves.items():
        real = src[0] >= 0  # a real row moved in (poison moved in proves nothing about k)
        source = src[0].clamp(min=0)
        same_values = real & (base_prints[torch.searchsorted(every, source)] == cand_prints) & (frame.n_u[probe] > 0)
        same_word = real & (base_words[source] == cand_word)
        for what, hits in zip(scores, (same_values & same_word, same_values, same_word & word_differs)):
            scores[what] |= {(by, offset): n for offset, n in zip(offsets, hits.sum(dim=1).tolist())}
    half = max(probe.numel() / 2, MIN_UNITS)
    # the (by, k) with the most matches, slots before tokens and the smallest |k| on ties
    for what, minimum in (("rows", half), ("values", half),
                          ("scales", max(SCALE_SHARE * int(word_differs.sum()), MIN_WORDS))):
        score = scores[what]
        move = max(score, key=lambda key: (score[key], key[0] == "slots", -abs(key[1])), default=None)
        if move is not None and score[move] >= minimum:
            return _take(frame, open_units, tables, what, *move)
    return [], torch.zeros_like(differs)


def _take(frame: Frame, units: torch.Tensor, tables, what: str, by: str, k: int) -> tuple[list[Claim], torch.Tensor]:
    """The claims of one move found by the probe, over every differing unit it explains exactly."""
    src, known = _sources(frame, tables, units, by, k)
    # the value rows and scale words the moved writer leaves at `units`: the poison where it moves nothing in
    moved, source = (src >= 0).view(-1, 1), src.clamp(min=0)
    rows = torch.where(moved, frame.value_rows(frame.base_phys, source), frame.value_poison(units))
    words = torch.where(moved, frame.base_wb[source], frame.scale_poison(units))
    same_values = (frame.value_rows(frame.cand_phys, units) == rows).all(dim=1)
    same_word = (frame.cand_wb[units] == words).all(dim=1)
    # a value move leaves units whose scale differs too to the scale causes, whole
    fits = known & {"rows": same_values & same_word,
                    "values": same_values & (frame.n_u[units] > 0) & (frame.wdiff_u[units] == 0),
                    "scales": same_word & (frame.wdiff_u[units] > 0)}[what]
    taken = frame.units_mask(units[fits])
    claim = unit_claim(frame, Category.SHIFT, taken, value=True, scale=what != "values")
    return [claim, note(Category.SHIFT, {"moved": what, "by": by, "offset": k}, units=(fits & (src >= 0)).sum())], taken


# ---- value bytes moved within a block or into a neighbouring one ------------------------------------------


def _runs(rows: torch.Tensor, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(int64 [n, V]: the RUN bytes at p, p + stride, ... of each row packed into one number, bool [V]: the
    run stays inside the row)."""
    v = rows.shape[1]
    index = torch.arange(v, device=rows.device).view(-1, 1) + stride * torch.arange(RUN, device=rows.device)
    inside = ((index >= 0) & (index < v)).all(dim=1)
    return (rows[:, index.clamp(0, v - 1)].long() << 8 * torch.arange(RUN, device=rows.device)).sum(dim=2), inside


def byte_moves(frame: Frame) -> tuple[torch.Tensor | None, dict]:
    """(int64 [V]: for each value byte of a block, (delta + 1) * V + q where the candidate holds the
    baseline's byte q of the block delta in {-1, 0, 1} away, -1 where none; the findings). Found from runs of
    RUN bytes of a probe of fully mapped blocks equal to a run (STRIDES) that occurs once in the baseline's
    blocks, the same way in two probed blocks: a wrong term or sign in an offset moves every block alike."""
    spec, v = frame.spec, frame.spec.value_extent
    nd, device = frame.blocks.numel(), frame.blocks.device
    full = (frame.source.view(nd, -1) >= 0).all(dim=1) & (frame.n_u.view(nd, -1) > 0).any(dim=1)
    probe = torch.nonzero(full).view(-1)[:PROBE_BLOCKS]
    if not spec.layout.planar or not probe.numel():
        return None, {}
    cand, _ = _runs(frame.cand_phys[probe, :v], 1)
    start, step = torch.arange(v, device=device), torch.arange(RUN, device=device)
    votes = []
    for i, block in enumerate(frame.blocks[probe].tolist()):
        keys, sources = [], []
        for delta in (-1, 0, 1):
            j = min(int(torch.searchsorted(frame.blocks, block + delta)), nd - 1)  # blocks ascend
            for stride in STRIDES if int(frame.blocks[j]) == block + delta else ():
                packed, inside = _runs(frame.base_phys[j : j + 1, :v], stride)
                keys.append(packed[0, inside])
                sources.append((delta + 1) * v + start[inside].view(-1, 1) + stride * step)
        keys, inverse, counts = torch.unique(torch.cat(keys), return_inverse=True, return_counts=True)  # sorted
        sources = torch.zeros(keys.numel(), RUN, dtype=torch.int64, device=device).index_copy_(
            0, inverse, torch.cat(sources))  # the source of each key that occurs once
        at_key = torch.searchsorted(keys, cand[i, : v - RUN + 1]).clamp(max=keys.numel() - 1)
        hit = torch.nonzero((keys[at_key] == cand[i, : v - RUN + 1]) & (counts[at_key] == 1)).view(-1)
        source, position = sources[at_key[hit]], hit.view(-1, 1) + step  # [m, RUN] each
        moved = source != v + position  # a byte at its own place is no move
        votes.append(torch.unique(position[moved] * 3 * v + source[moved]))
    key, support = torch.unique(torch.cat(votes), return_counts=True)
    position, source = key // (3 * v), key % (3 * v)
    best = torch.zeros(v, dtype=torch.int64, device=device).scatter_reduce(0, position, support, "amax")
    top = support == best[position]
    ties = torch.bincount(position[top], minlength=v)
    keep = top & (ties[position] == 1) & (support >= min(2, probe.numel()))
    moves = torch.full((v,), -1, dtype=torch.int64, device=device)
    moves[position[keep]] = source[keep]
    if not bool(keep.any()):
        return None, {}
    return moves, _moves_found(moves, v, spec.layout is Layout.SHUFFLE)


def _moves_found(moves: torch.Tensor, v: int, shuffle: bool) -> dict:
    """The findings: the moved positions, how many come from a neighbouring block, and the permutation of
    the shuffle layout's 16 x 16 tiles where every move stays inside its own tile the same way: `transposed`
    (row and column of the tile exchanged), `rows reversed`, `columns reversed`, or `permuted`."""
    position = torch.nonzero(moves >= 0).view(-1)
    source = moves[position] - v
    tile = TILE * TILE
    p = torch.arange(tile, device=moves.device)
    perm = p.clone()
    perm[position % tile] = source % tile
    moved = int((perm != p).sum())
    inside = bool((source // tile == position // tile).all() & (perm[position % tile] == source % tile).all())
    if shuffle and inside and position.numel() == (v // tile) * moved:
        r, c = p // TILE, p % TILE
        named = {"transposed": c * TILE + r, "rows reversed": (TILE - 1 - r) * TILE + c,
                 "columns reversed": r * TILE + (TILE - 1 - c)}
        name = next((name for name, table in named.items() if torch.equal(perm, table)), "permuted")
        return {"permutation": name, "moved_positions": moved}
    return {"permutation": "moved", "moved_positions": position.numel(),
            "from_neighbour": int(((source < 0) | (source >= v)).sum())}

