"""The closed choices of `--slots` and `--inputs`, apart from inputs.py (which makes them) because the CLI
builds its options from them at startup and `fp8check --help` must not import torch."""

from __future__ import annotations

import enum


class SlotPattern(enum.Enum):
    SEQUENTIAL = "sequential"
    SHUFFLED = "shuffled"
    PADDED = "padded"  # -1 entries mixed in: those tokens must write nothing
    SPARSE = "sparse"  # odd blocks get no token at all


class Distribution(enum.Enum):
    NORMAL = "normal"
    UNIFORM = "uniform"
    OUTLIERS = "outliers"  # a few huge elements per row: the rest quantize into the subnormals
    UE8M0_BOUNDARY = "ue8m0-boundary"  # amax on DIV * 2^k and one bf16 ulp either side (docs/NUMERICS.md)
    TIES = "ties"  # x / s on FP8 rounding midpoints
    TINY = "tiny"  # zero rows, amax below the 1e-4 scale floor, fp32 denormals
    SPECIALS = "specials"  # -0.0 and +0.0 mixed in; inf / NaN only with inf_nan (the real writers disagree)
    MIXED = "mixed"  # every row drawn from one of the others
    # normal-like rows from a counter-based hash of (seed, element): the same bytes on every device,
    # generated where the cache lives (inputs.hashed_k); not part of MIXED, whose bytes stay as they were
    HASHED = "hashed"
