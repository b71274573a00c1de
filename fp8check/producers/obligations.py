"""What a reader must not do, checked on every read (docs/parity.md): a finite logit at a position its row may
not see (amd-aiter 0.1.7's Triton reader lets MTP row 0 see one future token), and a write outside its rows of
a caller-made output buffer, which has poisoned guard rows and columns (aiter 0.1.7 writes a logit past its
row). Pure functions on tensors; the verdict is parity's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

GUARD_ROWS = 1  # above and below the rows
GUARD_COLUMNS = 64  # past max_model_len in every row
GUARD_BITS = 0x7FC0DEAD  # a quiet NaN with a payload no kernel computes: the poison of every guard element
SHOWN = 3  # positions kept per finding


@dataclass(frozen=True)
class Leak:
    """A finite logit where the row may not look."""

    row: int  # output row (sequence * next_n + mtp_row)
    sequence: int
    mtp_row: int
    position: int
    last_visible: int  # the last position this row may see
    value: float

    def describe(self) -> str:
        return (f"row {self.row} (sequence {self.sequence}, MTP row {self.mtp_row}) has {self.value:.6g} at position"
                f" {self.position}; it may see positions 0-{self.last_visible} only")

    def to_dict(self) -> dict:  # NaN is no JSON value
        return {**dataclasses.asdict(self), "value": self.value if self.value == self.value else None}


@dataclass(frozen=True)
class OutsideWrite:
    """A guard element of the output buffer the reader wrote: row -1 / rows (guard rows) or a column at or
    past max_model_len."""

    row: int
    column: int

    def describe(self, rows: int, max_model_len: int) -> str:
        if 0 <= self.row < rows:
            return f"row {self.row}, column {self.column} (past the row's {max_model_len} logits)"
        return f"guard row {'above' if self.row < 0 else 'below'} the output, column {self.column}"


@dataclass(frozen=True)
class Findings:
    """What one or more reads broke: leaks (counted, first SHOWN kept) and writes outside the rows."""

    leaks: int = 0
    leaked: tuple[Leak, ...] = ()
    outside: int = 0
    written: tuple[OutsideWrite, ...] = ()

    @property
    def broken(self) -> bool:
        return bool(self.leaks or self.outside)

    def __add__(self, other: "Findings") -> "Findings":
        """Findings of several reads: the larger counts (the reads see the same mask), the positions of both."""
        leaked = tuple(dict.fromkeys(self.leaked + other.leaked))[:SHOWN]
        written = tuple(dict.fromkeys(self.written + other.written))[:SHOWN]
        return Findings(max(self.leaks, other.leaks), leaked, max(self.outside, other.outside), written)

    def to_dict(self) -> dict:
        return {"leaks": self.leaks, "leaked": [x.to_dict() for x in self.leaked], "outside_writes": self.outside,
                "written": [dataclasses.asdict(x) for x in self.written]}


def leaks(logits: torch.Tensor, context_lens: torch.Tensor, next_n: int) -> tuple[int, tuple[Leak, ...]]:
    """(count, first SHOWN) of positions a row may not see that do not hold -inf (NaN counts: it is not -inf)."""
    rows, width = logits.shape
    ctx = context_lens.view(-1, context_lens.shape[-1] if context_lens.dim() > 1 else 1)[:, -1].to(logits.device)
    last = (ctx.long().repeat_interleave(next_n) - next_n + torch.arange(rows, device=logits.device) % next_n)
    position = torch.arange(width, device=logits.device).view(1, -1)
    bad = (position > last.view(-1, 1)) & ~(logits == float("-inf"))
    return int(bad.sum()), tuple(Leak(row, row // next_n, row % next_n, pos, int(last[row]), float(logits[row, pos]))
                                 for row, pos in torch.nonzero(bad)[:SHOWN].tolist())


@dataclass(frozen=True)
class GuardedOutput:
    """A caller-made output buffer with poisoned guard rows and columns; `logits` is the view a reader fills."""

    buffer: torch.Tensor  # float32 [rows + 2 * GUARD_ROWS, max_model_len + GUARD_COLUMNS]
    rows: int
    max_model_len: int

    @classmethod
    def allocate(cls, rows: int, max_model_len: int, device) -> "GuardedOutput":
        bits = torch.full((rows + 2 * GUARD_ROWS, max_model_len + GUARD_COLUMNS), GUARD_BITS, dtype=torch.int32,
                          device=device)
        out = cls(bits.view(torch.float32), rows, max_model_len)
        out.logits.fill_(float("-inf"))  # what vLLM's callers hand over: every position masked
        return out

    @property
    def logits(self) -> torch.Tensor:
        """float32 [rows, max_model_len], row stride max_model_len + GUARD_COLUMNS."""
        return self.buffer[GUARD_ROWS : GUARD_ROWS + self.rows, : self.max_model_len]

    def outside_writes(self) -> tuple[int, tuple[OutsideWrite, ...]]:
        """(count, first SHOWN) of guard elements no longer holding the poison bits."""
        changed = self.buffer.view(torch.int32) != GUARD_BITS
        changed[GUARD_ROWS : GUARD_ROWS + self.rows, : self.max_model_len] = False
        return int(changed.sum()), tuple(OutsideWrite(r - GUARD_ROWS, c)
                                         for r, c in torch.nonzero(changed)[:SHOWN].tolist())
