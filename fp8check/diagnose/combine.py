"""The combiner: run the stages in order, add up their claims, and check that every differing byte was
attributed exactly once (a mismatch is fp8check's own bug: CheckerError, exit 3, never a verdict)."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import torch

from ..core.cache import CacheBuffer
from ..core.diff import DiffResult
from ..core.errors import CheckerError
from ..core.inputs import Inputs
from ..core.spec import CacheSpec
from . import bytewise, moved, scales, systemic, where
from .claims import Claim
from .decide import cause_facts, example
from .frame import Frame, build_frame, differing_units, unit_runs
from .model import EXAMPLES, Category, Cause, Diagnosis, Located


def _value_stages(frame: Frame) -> list[Claim]:
    """Stages 1-4 over the differing blocks; each takes the units the earlier ones left open."""
    # whole units first, each taking all the bytes of its units: blocks of whole tokens at other places
    # (interleaved against planar), groups of non-finite inputs, real tokens overwritten by padding rows, rows
    # shifted by k slots or tokens, rows of no token, groups loaded as zeros
    claims: list[Claim] = []
    for stage in (systemic.arrangement_blocks, where.non_finite, where.overwritten, moved.shifted,
                  where.foreign_rows, where.zero_input):
        more, taken = stage(frame)
        claims += more
        if bool(taken.any()):
            frame = dataclasses.replace(frame, n_u=torch.where(taken, 0, frame.n_u),
                                        wdiff_u=torch.where(taken, 0, frame.wdiff_u))
    open_u = frame.n_u > 0
    if bool(open_u.any()):  # value bytes moved the same way in every block: claimed byte by byte
        frame = dataclasses.replace(frame, moves=moved.byte_moves(frame))
    for stage in (where.unmapped, scales.scales):
        more, taken = stage(frame, open_u)
        claims += more
        open_u = open_u & ~taken
    layout, taken, settled = systemic.layout_blocks(frame, open_u)
    open_u = open_u & ~taken
    dense, taken, leftovers, garbage = systemic.dense_units(frame, open_u, settled)
    open_u = open_u & ~taken
    # a systemic cause found in dense units needs only one matching byte in a sparse one
    active = frozenset(c.category for c in layout + dense if c.bytes)
    return (claims + layout + dense + bytewise.byte_by_byte(frame, open_u, settled, active)
            + bytewise.dense_byte_local(frame, leftovers) + bytewise.dense_byte_local(frame, garbage, False))


@dataclass
class _Tally:
    """The claims of one diagnosis added up per category (local to `diagnose`)."""

    bytes: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=lambda: defaultdict(list))
    counts: dict = field(default_factory=lambda: defaultdict(Counter))
    found: dict = field(default_factory=lambda: defaultdict(dict))
    per_block: dict = field(default_factory=dict)  # category -> int64 [nd]
    shown: dict = field(default_factory=lambda: defaultdict(list))  # category -> [int64 flat indices]


def _tally(claims: list[Claim]) -> _Tally:
    tally = _Tally()
    for claim in claims:
        category = claim.category
        tally.counts[category].update(claim.counts)
        tally.found[category].update(claim.found)
        if claim.bytes <= 0:
            continue
        tally.bytes[category] += claim.bytes
        tally.examples[category] += claim.examples  # the first EXAMPLES are kept
        if claim.per_block is not None:
            tally.per_block[category] = tally.per_block.get(category, 0) + claim.per_block
        if claim.shown is not None:
            tally.shown[category].append(claim.shown)
    return tally


def _located(spec: CacheSpec, tally: _Tally, frame: Frame, picked: tuple[int, ...]) -> Located:
    """Where the categories' bytes are, checked like the totals: each frame block's bytes and each differing
    byte of the shown blocks attributed exactly once (else CheckerError); picked blocks outside: empty."""
    order = list(Category)
    per_block = torch.zeros(spec.num_blocks, len(order), dtype=torch.int64, device=frame.blocks.device)
    for category, counts in tally.per_block.items():
        per_block[frame.blocks, order.index(category)] += counts
    expected = (frame.n_u + frame.wdiff_u).view(frame.blocks.numel(), -1).sum(dim=1)  # the frame as built
    if not torch.equal(per_block[frame.blocks].sum(dim=1), expected):
        raise CheckerError("diagnosis: the causes' bytes per block do not add up to the differing bytes per block")
    parts = {order.index(c): torch.cat(p) for c, p in tally.shown.items()}  # code -> int64 flat indices
    flat = torch.cat([per_block.new_zeros(0), *parts.values()])
    codes = torch.cat([per_block.new_zeros(0), *(torch.full_like(p, c) for c, p in parts.items())]).to(torch.uint8)
    shown = frame.shown
    differing = int(torch.count_nonzero(frame.base_phys[shown] != frame.cand_phys[shown]))
    if flat.numel() != differing or torch.unique(flat).numel() != flat.numel():
        raise CheckerError(f"diagnosis: {flat.numel()} bytes of the shown blocks attributed, {differing} differ")
    order_by = torch.argsort(flat)
    blocks = tuple(sorted(set(picked))) if picked else tuple(frame.blocks[shown].tolist())
    return Located(per_block, blocks, flat[order_by], codes[order_by])


def _causes(spec: CacheSpec, tally: _Tally, frame: Frame | None, baseline: CacheBuffer,
            candidate: CacheBuffer) -> tuple[Cause, ...]:
    causes = []
    for category, count in tally.bytes.items():
        per_block = tally.per_block.get(category)  # none for guard bytes; the frame's blocks ascend
        blocks = tuple(frame.blocks[per_block > 0].tolist()) if per_block is not None else ()
        facts = cause_facts(spec, category, count, tally.counts[category], tally.found[category])
        examples = tuple(example(spec, category, locus, frame, baseline, candidate, tally.found[category])
                         for locus in tally.examples[category][:EXAMPLES])
        causes.append(Cause(category, count, blocks, facts, examples))
    return tuple(sorted(causes, key=lambda c: (-c.bytes, list(Category).index(c.category))))


def attribute(spec: CacheSpec, baseline: CacheBuffer, candidate: CacheBuffer, inputs: Inputs, *,
              diff: DiffResult | None = None, shown: tuple[int, ...] = ()) -> Diagnosis:
    """`diagnose` past a diff saying identical; a given diff's per-block counts say which blocks to read."""
    claims = where.guards(baseline, candidate, spec.num_blocks * spec.block_bytes)
    expected = int(torch.count_nonzero(baseline.guards != candidate.guards))
    runs = unit_runs(spec, spec.value_index(baseline.flat.device))
    blocks, a, b, n_u, wdiff_u = differing_units(spec, baseline, candidate, diff, runs)
    frame = None
    if blocks.numel():
        frame = build_frame(spec, inputs, blocks, a, b, n_u, wdiff_u, runs, shown)
        expected += int(frame.n_u.sum() + frame.wdiff_u.sum())
        claims += _value_stages(frame)
    tally = _tally(claims)
    if (found := sum(tally.bytes.values())) != expected:
        by_category = {c.value: n for c, n in tally.bytes.items()}
        raise CheckerError(f"diagnosis accounts for {found} bytes but {expected} differ: {by_category}")
    located = None if frame is None else _located(spec, tally, frame, shown)
    return Diagnosis(_causes(spec, tally, frame, baseline, candidate), located)
