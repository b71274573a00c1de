"""Why two caches differ: every differing byte attributed to exactly one root cause.

Pure: `diagnose(spec, baseline, candidate, inputs) -> Diagnosis`, tensors in, frozen records out, on
whatever device the caches live on. The inputs (k, slot_mapping) say which slots were written and let
the quotient x/s be recomputed where a cause needs it. Collect -> decide -> describe:

- collect (`frame`): the differing blocks as units (one token's quant group: qbs value bytes + one scale),
  all geometry from CacheSpec and cache.py;
- decide: stages, each a pure function returning claims (`claims`), the byte-pair tests in `fp8check.core.pairs`;
  `combine` adds them up and checks that every differing byte is attributed exactly once; `decide` turns
  counts into typed facts;
- describe: diagnose/words.py renders the facts as sentences (nothing here is prose).

Precedence (the first cause that fits takes the bytes; docs/NUMERICS.md for the facts):
1. where (`where`): guard bytes and bytes of slots no token maps to are
   `stray-write` (value bytes of an unmapped slot are first offered to `layout`, which moves bytes between
   the slots of a block);
2. scale words of mapped slots (`scales`): `unwritten` (still poison), `scale-ulp`, `scale-ratio`,
   `scale-pow2`. The value bytes of a quant group whose scale has one of the scale causes inherit it: a
   wrong scale moves every value of its group;
3. systemic value causes (`systemic`), judged per quant group from a sample of its columns, and then given
   all its differing bytes: `layout` (judged per block), `unwritten`, `fp8-format`, `integer-cast`. Units
   with few differing bytes are judged byte by byte instead (`bytewise`), and a cause needs 4 matching
   bytes and half the unit's (or just one byte once it was found in a dense unit), so chance coincidences
   (1 in 256) never add up to a cause;
4. byte-local causes (`bytewise`): `signed-zero`, `saturation-nan`, `rounding`; a byte still holding poison
   is `unwritten`;
5. `unknown`, with examples.
"""

from ..core.errors import CheckerError
from .model import EXAMPLES, Category, Cause, Diagnosis, Example

DiagnosisError = CheckerError  # the diagnosis' own bookkeeping failed: a checker error, exit 3

__all__ = ["EXAMPLES", "Category", "Cause", "Diagnosis", "DiagnosisError", "Example", "diagnose"]


def diagnose(spec, baseline, candidate, inputs, *, diff=None, shown=()) -> Diagnosis:
    """Attribute every byte that differs between the two caches (guard bytes included) to one cause
    (combine.attribute). `diff`: diff_caches' result for these two caches, if at hand; when it says they
    are identical, guards included, there is nothing to attribute: no stage is imported, no tensor read.
    `shown`: blocks whose every differing byte's cause is kept (Diagnosis.located; default: the first
    frame.SHOWN_BLOCKS that differ)."""
    if diff is not None and diff.identical:
        return Diagnosis()
    from .combine import attribute

    return attribute(spec, baseline, candidate, inputs, diff=diff, shown=shown)
