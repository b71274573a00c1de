"""The diagnosis as data: categories, causes with typed facts, examples. Rendered by diagnose/words.py."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..core.outcome import json_safe
from ..core.spec import Coordinate

EXAMPLES = 3  # examples kept per cause


class Category(enum.Enum):
    UNWRITTEN = "unwritten"
    STRAY_WRITE = "stray-write"
    INTEGER_CAST = "integer-cast"
    LAYOUT = "layout"
    FP8_FORMAT = "fp8-format"
    SCALE_RATIO = "scale-ratio"
    SCALE_POW2 = "scale-pow2"
    SCALE_ULP = "scale-ulp"
    ROUNDING = "rounding"
    SATURATION_NAN = "saturation-nan"
    SIGNED_ZERO = "signed-zero"
    AMAX_FLOOR = "amax-floor"
    UE8M0_ROUNDING = "ue8m0-rounding"
    SCALE_SWAP = "scale-swap"
    SHIFT = "shift"
    PERMUTATION = "permutation"
    AMAX = "amax"
    QUOTIENT = "quotient"
    SCALE_FORMAT = "scale-format"
    NON_FINITE = "non-finite-input"
    ZERO_INPUT = "zero-input"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Example:
    """One differing byte of a cause: where, both bytes, both decoded values, and what fits there."""

    coordinate: Coordinate | None  # None: a guard byte outside the cache
    guard_offset: int | None  # guard bytes: -1 is the byte right before the cache, 0 the first one past its end
    baseline_byte: int
    candidate_byte: int
    baseline_value: float | None  # value region: FP8 values; scale region: the fp32 scales
    candidate_value: float | None
    facts: dict = field(default_factory=dict)  # what fits at this byte (the quotient, the moved token...)

    def where(self) -> str:
        if self.coordinate is not None:
            return self.coordinate.describe()
        if self.guard_offset < 0:
            return f"guard byte {-self.guard_offset} before the cache"
        return f"guard byte {self.guard_offset} past the end of the cache"

    def to_dict(self) -> dict:
        c = self.coordinate
        return {"block": c.block if c else None, "token": c.token if c else None, "dim": c.dim if c else None,
                "scale_group": c.group if c else None, "region": c.region.value if c else "guard",
                "byte_in_block": c.byte_in_block if c else None, "guard_offset": self.guard_offset,
                "baseline_byte": f"0x{self.baseline_byte:02x}", "candidate_byte": f"0x{self.candidate_byte:02x}",
                "baseline_value": json_safe(self.baseline_value), "candidate_value": json_safe(self.candidate_value),
                "facts": json_safe(self.facts)}


@dataclass(frozen=True)
class Cause:
    """One root cause: its bytes, the blocks holding them, typed facts (JSON-safe) and examples."""

    category: Category
    bytes: int
    blocks: tuple[int, ...]  # blocks holding at least one of the bytes (guard bytes have none)
    facts: dict  # machine-readable findings, e.g. {"ratio": 1.0714, "divisors": [240.0, 224.0]}
    examples: tuple[Example, ...]

    def to_dict(self) -> dict:
        """The cause without prose (diagnose/words.py adds the explanation and the hint)."""
        return {"category": self.category.value, "bytes": self.bytes, "blocks": list(self.blocks),
                "facts": json_safe(self.facts), "examples": [e.to_dict() for e in self.examples]}


@dataclass(frozen=True)
class Located:
    """Where each category's cache bytes are (guard bytes have no place in a block): a count per block for
    the whole cache, and every differing byte of the first differing blocks (frame.SHOWN_BLOCKS)."""

    per_block: "torch.Tensor"  # int64 [num_blocks, len(Category)]: differing bytes per block and category
    shown_blocks: tuple[int, ...]  # cache blocks, ascending
    shown_bytes: "torch.Tensor"  # int64 [N]: flat cache index of every differing byte of the shown blocks
    shown_codes: "torch.Tensor"  # uint8 [N]: each one's category, as its index in list(Category)


@dataclass(frozen=True)
class Diagnosis:
    """The causes of all differing bytes, most bytes first; empty when the caches are identical."""

    causes: tuple[Cause, ...] = ()
    located: Located | None = field(default=None, compare=False, repr=False)  # None: nothing differs in the cache

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.causes)

    @property
    def top(self) -> Cause | None:
        return self.causes[0] if self.causes else None

    def __len__(self) -> int:
        return len(self.causes)

    def __iter__(self):
        return iter(self.causes)

    def by_category(self) -> dict[Category, Cause]:
        return {c.category: c for c in self.causes}

    def to_json(self) -> list[dict]:
        return [c.to_dict() for c in self.causes]
