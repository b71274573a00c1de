"""Why two caches differ: every differing byte attributed to exactly one root cause.

Pure: `diagnose(spec, baseline, candidate, inputs) -> Diagnosis`, tensors in, frozen records out, on
whatever device the caches live on. The inputs (k, slot_mapping) say which slots were written and let
the quotient x/s be recomputed where a cause needs it. Collect (`frame`: the differing blocks as units, one
token's quant group of qbs value bytes and one scale) -> decide (stages returning `claims`, the byte-pair
tests in `fp8check.core.pairs`; `combine` adds them up and checks that every differing byte is attributed
exactly once; `decide` turns counts into typed facts) -> describe (`words`: the only prose).

Precedence (the first cause that fits takes the bytes; `combine._value_stages` runs them in order):
1. whole units: re-arranged blocks, non-finite inputs, rows moved by k slots or tokens (`moved`), stray rows;
   guard bytes and bytes of slots no token maps to are `stray-write` (`where`);
2. scale words of mapped slots (`scales`); a group's values inherit its scale's cause;
3. systemic value causes (`systemic`) judged per quant group from a sample of its columns; units with few
   differing bytes are judged byte by byte (`bytewise`), a cause needing 4 matching bytes and half the
   unit's, so chance coincidences (1 in 256) never add up to a cause;
4. byte by byte (`bytewise`): value bytes moved the same way in every block (`moved.byte_moves`), then
   `signed-zero`, `saturation-nan`, `rounding`, poison (`unwritten`);
5. `unknown`, with examples.
"""

from .model import EXAMPLES, Category, Cause, Diagnosis, Example

__all__ = ["EXAMPLES", "Category", "Cause", "Diagnosis", "Example", "diagnose"]


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
