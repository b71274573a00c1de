"""Why two caches differ: every differing byte attributed to exactly one root cause, tensors in and frozen
records out on whatever device the caches live on (docs/ARCHITECTURE.md: collect, decide, describe).

Precedence, the first cause that fits taking the bytes (`combine._value_stages`): whole units (re-arranged
blocks, non-finite inputs, rows moved by k slots or tokens, stray rows; guard bytes and slots no token maps to
are `stray-write`); scale words of mapped slots, a group's values inheriting its scale's cause; systemic value
causes judged per quant group from a sample of its columns, units with few differing bytes byte by byte (a cause
needs 4 matching bytes and half the unit's, so chance coincidences, 1 in 256, never add up to a cause); byte by
byte: value bytes moved alike in every block, `signed-zero`, `saturation-nan`, `rounding`, poison
(`unwritten`); `unknown`, with examples.
"""

from .model import EXAMPLES, Category, Cause, Diagnosis, Example

__all__ = ["EXAMPLES", "Category", "Cause", "Diagnosis", "Example", "diagnose"]


def diagnose(spec, baseline, candidate, inputs, *, diff=None, shown=()) -> Diagnosis:
    """Attribute every byte that differs between the two caches (guard bytes included) to one cause
    (combine.attribute); `inputs` (k, slot_mapping) say which slots were written and give x for x/s. `diff`:
    diff_caches' result for these two caches, if at hand; when it says they are identical, guards included,
    there is nothing to attribute: no stage is imported, no tensor read. `shown`: blocks whose every differing
    byte's cause is kept (Diagnosis.located; default: the first frame.SHOWN_BLOCKS that differ)."""
    if diff is not None and diff.identical:
        return Diagnosis()
    from .combine import attribute

    return attribute(spec, baseline, candidate, inputs, diff=diff, shown=shown)
