"""The CLI process's start and end: the garbage collector off while a command imports its modules, on
again (with what the imports made frozen) when the command starts its work; and, once the command's
outputs are written, an end without the interpreter's teardown (`exit_process`).

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
import os
import sys
import threading

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


# set (to anything but "" or "0") for the interpreter's usual teardown, e.g. under a leak checker
FULL_EXIT = "FP8CHECK_FULL_EXIT"


def exit_process(code: int):
    """End the process with `code` as the interpreter would, without its teardown of the modules.

    After a command the interpreter frees every object torch and Triton made at import, module by module,
    and a GPU run's caching allocator and context: 0.35 s of a CPU run on the 2-core VM and 0.5-0.75 s
    on the H200 (bench/timeline.py), all after the command's last output. Here the process does what
    that teardown does for the outside world and then stops: it waits for the threads that are not
    daemons (as the interpreter would), runs the atexit handlers (logging's flush, multiprocessing's
    reaping, a coverage tool's save), flushes Python's and C's standard streams, and calls os._exit. What
    is left (memory, the GPU context, open descriptors) the operating system reclaims as for any exit.
    Only the console script and `python -m fp8check` end this way; `main()` returns, for the tests and
    for callers in their own processes. Set FP8CHECK_FULL_EXIT=1 for the usual teardown."""
    import atexit

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if os.environ.get(FULL_EXIT, "") not in ("", "0") or run_exitfuncs is None:
        sys.exit(code)
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    try:  # what C code printed (its stdio buffers are not Python's)
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:  # noqa: BLE001 - no C library to ask: nothing buffered there either
        pass
    os._exit(code)
