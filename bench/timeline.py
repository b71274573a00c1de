"""When each stage of a fresh `fp8check compare` process starts and ends, on every thread, measured from
the end of the process's own `import torch`, beside the floor's (bench/post_torch.py) in alternating
rounds.

    PYTHONPATH=. python3 bench/timeline.py [ROUNDS] [compare options...]
        (default: 5 rounds of --device cuda --num-blocks 16384)
    PYTHONPATH=. python3 bench/timeline.py --profile [compare options...]

bench/startup.py times stages with a synchronize after each and creates the CUDA context before the
command runs; here nothing is synchronized and the command runs as the command line runs it, with the
context created by its own warm-up thread, so the table shows what overlaps what. fp8check's functions
are wrapped as their modules are imported (an import hook: importing them ahead would move the imports
in front of the early warm-up). Times are CLOCK_MONOTONIC (time.perf_counter), which the parent and the
child share, so the parent's end of the process (after the interpreter's teardown) is on the same axis.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import post_torch  # noqa: E402

# (module, attribute, label); "Class.method" wraps a method of a class
TARGETS = [
    ("fp8check.warmup", "start_early", None), ("fp8check.warmup", "import_launch_modules", None),
    ("fp8check.warmup", "exercise", "warmup.exercise (CUDA context, then the ops' first uses)"),
    ("torch.cuda", "init", "torch.cuda.init (cuInit)"),
    ("fp8check.cache", "CacheBuffer.allocate", None), ("threading", "Thread.start", None),
    ("fp8check.cli.startup", "imports_done", None),
    ("fp8check.prepare", "start", None), ("fp8check.prepare", "check_memory", None),
    ("fp8check.prepare", "resolve_producers", None), ("fp8check.prepare", "Started.result", None),
    ("fp8check.device", "resolve_device", None),
    ("fp8check.triton_memo", "install", None),
    ("fp8check.inputs", "start_generate", None), ("fp8check.inputs", "check_slots", None),
    ("fp8check.input_cache", "Background._run", "input_cache.Background (K read and copied)"),
    ("fp8check.input_cache", "checksum", None), ("fp8check.input_cache", "_read", None),
    ("fp8check.gate", "check_compare", None), ("fp8check.gate", "diagnose", None),
    ("fp8check.compare", "compare", None), ("fp8check.compare", "run_side", None),
    ("fp8check.diff", "diff_caches", None),
    ("fp8check.cli.common", "emit", None), ("fp8check.report.terminal", "render_compare", None),
    ("triton.runtime.jit", "JITFunction.run", "triton launch"),
]

CHILD = r"""
import time, sys; t0 = time.perf_counter(); import torch; t1 = time.perf_counter()
sys.path.insert(0, {here!r})
import timeline
timeline.child(t0, t1, sys.argv[1:])
"""

# post_torch's floor (its imports, then its context), with the times between them reported at exit
FLOOR = f"""
import time, sys; t0 = time.perf_counter(); import torch; t1 = time.perf_counter()
import gc, json, atexit; gc.disable(); {post_torch.FLOOR_IMPORTS}; t2 = time.perf_counter()
{post_torch.FLOOR_CONTEXT}; gc.enable(); t3 = time.perf_counter()
atexit.register(lambda: print(json.dumps({{"torch": [t0, t1], "events": [
    ["main", "floor: imports", t1, t2], ["main", "floor: CUDA context", t2, t3],
    ["main", "atexit", time.perf_counter(), time.perf_counter()]]}}), file=sys.stderr))
from fp8check.cli.startup import exit_process; exit_process(0)
"""


def child(t0: float, t1: float, argv: list[str]) -> None:
    """Run `fp8check compare ARGV` with TARGETS wrapped as they are imported; print the events as JSON
    on stderr at exit (after the non-daemon threads are joined)."""
    import atexit
    import importlib.abc
    import importlib.machinery
    import threading

    events: list[list] = []
    by_module: dict[str, list] = {}
    for module, attr, label in TARGETS:
        by_module.setdefault(module, []).append((attr, label or f"{module.removeprefix('fp8check.')}.{attr}"))

    def wrap(fn, label):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                events.append([threading.current_thread().name, label, start, time.perf_counter()])
        wrapper.__name__ = getattr(fn, "__name__", "wrapped")
        return wrapper

    profile = None
    if os.environ.get("TIMELINE_PROFILE"):  # `--profile`: the main thread's Python after the imports
        import cProfile

        profile = cProfile.Profile()

    def patch(module) -> None:
        for attr, label in by_module.get(module.__name__, []):
            owner, name = module, attr
            if "." in attr:
                owner_name, name = attr.split(".")
                owner = getattr(module, owner_name)
            setattr(owner, name, wrap(getattr(owner, name), label))
        if profile is not None and module.__name__ == "fp8check.cli.startup":
            done = module.imports_done

            def imports_done():
                done()
                profile.enable()
            module.imports_done = imports_done

    class Loader(importlib.abc.Loader):
        def __init__(self, inner):
            self.inner = inner

        def create_module(self, spec):
            return self.inner.create_module(spec)

        def exec_module(self, module):
            self.inner.exec_module(module)
            patch(module)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in by_module:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = Loader(spec.loader)
            return spec

    sys.meta_path.insert(0, Finder())
    for name in list(by_module):  # already imported (torch imports none of them; a rerun might)
        if name in sys.modules:
            patch(sys.modules[name])

    def report() -> None:
        events.append(["main", "atexit", time.perf_counter(), time.perf_counter()])
        print(json.dumps({"torch": [t0, t1], "events": events}), file=sys.stderr)

    atexit.register(report)
    from fp8check.cli import main

    from fp8check.cli.startup import exit_process

    start = time.perf_counter()
    code = main(["compare", *argv])
    events.append(["main", f"cli.main (exit {code})", start, time.perf_counter()])
    if profile is not None:
        import io
        import pstats

        profile.disable()
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats(key).print_stats(45)
            print(out.getvalue(), file=sys.stdout)
        out = io.StringIO()  # who calls what costs most (TIMELINE_CALLERS: comma-separated patterns)
        for pattern in filter(None, os.environ.get("TIMELINE_CALLERS", "").split(",")):
            pstats.Stats(profile, stream=out).sort_stats("cumulative").print_callers(pattern)
        print(out.getvalue(), file=sys.stdout)
    exit_process(code)  # as the console script ends


def run(code: str, argv: list[str], full_exit: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": ".", "FP8CHECK_FULL_EXIT": "1" if full_exit else ""}
    begin = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    end = time.perf_counter()
    if done.returncode not in (0, 1):
        raise SystemExit(f"exit {done.returncode}: {done.stderr[-800:]}")
    record = json.loads(done.stderr.strip().splitlines()[-1])
    base = record["torch"][1]
    rows = {}
    for thread, label, start, stop in record["events"]:
        key = ("main" if thread in ("main", "MainThread") else thread.removeprefix("fp8check-"), label)
        n = 2
        while key in rows:  # the second call of the same function
            key = (key[0], f"{label} #{n}")
            n += 1
        rows[key] = (start - base, stop - base)
    rows[("main", "process end")] = (end - base, end - base)
    rows[("main", "(before import torch: interpreter start)")] = (begin - base, record["torch"][0] - base)
    return rows


def table(rounds: list[dict], title: str) -> str:
    keys = {key for rows in rounds for key in rows}
    medians = []
    for key in keys:
        seen = [rows[key] for rows in rounds if key in rows]
        medians.append((statistics.median(s for s, _ in seen), statistics.median(e for _, e in seen),
                        statistics.median(e - s for s, e in seen), len(seen), key))
    lines = [f"{title} (ms after the process's own `import torch`; medians of {len(rounds)} rounds)",
             f"  {'thread':<12} {'stage':<62} {'start':>8} {'end':>8} {'took':>8}"]
    for start, end, took, count, (thread, label) in sorted(medians):
        mark = "" if count == len(rounds) else f" ({count}/{len(rounds)})"
        lines.append(f"  {thread:<12} {label + mark:<62} {start * 1e3:8.1f} {end * 1e3:8.1f} {took * 1e3:8.1f}")
    return "\n".join(lines)


def profiled(argv: list[str]) -> None:
    """`--profile`: one fresh compare (after two that fill the caches) with cProfile from the end of the
    command's imports to the end of main() (on Python 3.12 cProfile sees every thread, the warm-up's and
    K's too); the tables by own and by cumulative time, and TIMELINE_CALLERS' callers."""
    env = {**os.environ, "PYTHONPATH": ".", "TIMELINE_PROFILE": "1"}
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", CHILD.format(here=HERE), *argv], env=env, text=True,
                              capture_output=True)
    print(done.stdout)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--profile"]:
        return profiled(args[1:] or ["--device", "cuda", "--num-blocks", "16384"])
    count = int(args.pop(0)) if args and args[0].isdigit() else 5
    argv = args or ["--device", "cuda", "--num-blocks", "16384"]
    child_code, floor_code = CHILD.format(here=HERE), FLOOR
    # each subject ends either with the interpreter's teardown (FP8CHECK_FULL_EXIT=1) or as the console
    # script ends (cli.startup.exit_process)
    subjects = {"floor": (floor_code, True), "compare": (child_code, True),
                "floor, exit_process": (floor_code, False), "compare, exit_process": (child_code, False)}
    for code, full in list(subjects.values()) * 2:  # fill Triton's cache and fp8check's folder
        run(code, argv, full)
    rounds: dict[str, list[dict]] = {name: [] for name in subjects}
    end = ("main", "process end")
    for i in range(count):
        for name, (code, full) in subjects.items():
            rounds[name].append(run(code, argv, full))
        print(f"round {i + 1}: " + ", ".join(f"{name} {1e3 * rows[-1][end][1]:.0f}" for name, rows in rounds.items()),
              flush=True)
    for name, rows in rounds.items():
        print()
        print(table(rows, name if name.startswith("floor") else name.replace("compare", "compare " + " ".join(argv))))
    print(f"\nprocess ends (ms after import torch, medians of {count}), and compare's paired difference:")
    for kind in ("", ", exit_process"):
        floor, compare = rounds["floor" + kind], rounds["compare" + kind]
        paired = statistics.median(c[end][1] - f[end][1] for c, f in zip(compare, floor))
        print(f"  ending {'with exit_process' if kind else 'with the teardown':<20} floor "
              f"{1e3 * statistics.median(f[end][1] for f in floor):6.0f}, compare "
              f"{1e3 * statistics.median(c[end][1] for c in compare):6.0f}, paired {1e3 * paired:+5.0f}")
    full_floor = rounds["floor"]
    paired = statistics.median(c[end][1] - f[end][1] for c, f in zip(rounds["compare, exit_process"], full_floor))
    print(f"  compare as the console script ends, against the floor with the teardown: paired {1e3 * paired:+.0f}")


if __name__ == "__main__":
    main()
