"""The CLI process's garbage collector: off while a command imports its modules, on again (with what the
imports made frozen) when the command starts its work.

Importing torch and Triton makes a few million long-lived objects, and CPython's cyclic collector walks
them all again at each full collection: 0.2-0.4 s of a 2 s `fp8check compare` on the 2-core CPU machine,
and a ~70 ms full collection at whichever fp8check import happens to cross the threshold
(docs/PERFORMANCE.md). Nothing an import makes is garbage worth collecting, so `main()` turns the
collector off first (`arm`), each command calls `imports_done()` after its imports, and from then on
the collector runs as usual over the objects the run itself makes (`gc.freeze` moves the imported ones
out of its way). Only the command line does this: the Python API never touches the host's collector.
"""

from __future__ import annotations

import gc

_armed = False
_used = False
_froze = False


def arm() -> None:
    """Turn the collector off for the imports of the first command a process runs (only if it was on:
    a later `main()` in the same process, as in the tests, imports nothing new and changes nothing)."""
    global _armed, _used
    if not _used and gc.isenabled():
        gc.disable()
        _armed = True
    _used = True


def imports_done() -> None:
    """Freeze what the imports made and turn the collector back on (no-op unless `arm` turned it off)."""
    global _armed, _froze
    if _armed:
        gc.freeze()
        _froze = True
        gc.enable()
        _armed = False


def finish() -> None:
    """However the command ended (main's `finally`): the collector on, and nothing left frozen, so that
    the interpreter's exit frees the imported objects as usual (a frozen object is never collected, and
    nanobind, under Triton, reports the ones it sees outlive the interpreter)."""
    global _armed, _froze
    if _armed:
        gc.enable()
        _armed = False
    if _froze:
        gc.unfreeze()
        _froze = False
