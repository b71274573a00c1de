"""Fresh-process walls with `import torch` taken out: on a host whose `import torch` alone varies by
0.5-1 s between processes (the H200 machine, 2026-11-30), the floor and the command differ in what comes
after it. Each process times its own `import torch` (the same statement, with the collector on, in every
process), and the table subtracts it from the process's wall time (interpreter start to exit, teardown
included).

    PYTHONPATH=. python3 bench/post_torch.py [ROUNDS] [--base DIR] [compare options...]
        (default options: --device cuda --num-blocks 16384)

Subjects, alternating each round: `floor` (torch, then with the collector off the other imports of the
floor and the CUDA context, as fp8check's command line runs them), `floor_exit` (the same, ending as the
console script ends: cli.startup.exit_process, no interpreter teardown), `compare` (fp8check.cli.main of
this tree, ended as the console script ends) and, with --base DIR, `base` (the fp8check package under DIR,
run from DIR).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

HEAD = "import time, sys; t0 = time.perf_counter(); import torch; print(time.perf_counter() - t0, file=sys.stderr); "
# what the floor does after `import torch` (bench/timeline.py's floor runs the same two statements)
FLOOR_IMPORTS = "import triton, click, rich.console, fp8check.cli"
FLOOR_CONTEXT = "torch.zeros(1, device='cuda') if 'cuda' in sys.argv else None"
FLOOR = HEAD + f"import gc; gc.disable(); {FLOOR_IMPORTS}; {FLOOR_CONTEXT}; gc.enable()"
# the floor ending as the console script ends (cli.startup.exit_process: no interpreter teardown)
FLOOR_EXIT = FLOOR + "; from fp8check.cli.startup import exit_process; exit_process(0)"
# the command as the console script runs it (an older tree without exit_process ends with sys.exit)
COMPARE = HEAD + ("from fp8check.cli import main; import fp8check.cli.startup as s; "
                  "getattr(s, 'exit_process', sys.exit)(main(['compare', *sys.argv[1:]]))")


def post_torch(code: str, argv: list[str], cwd: str | None) -> float:
    env = {**os.environ, "PYTHONPATH": "."}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"exit {done.returncode}: {done.stderr[-500:]}")
    return wall - float(done.stderr.splitlines()[0])


def rounds(subjects: dict[str, tuple[str, str | None]], argv: list[str], count: int,
           on_round=None) -> dict[str, list[float]]:
    """Seconds after `import torch` of each subject (name -> (code, cwd)), `count` alternating rounds after
    two runs of each that fill the caches (Triton's, fp8check's folder); `on_round(rows)` after each."""
    for code, cwd in list(subjects.values()) * 2:
        post_torch(code, argv, cwd)
    rows: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(count):
        for name, (code, cwd) in subjects.items():
            rows[name].append(post_torch(code, argv, cwd))
        if on_round is not None:
            on_round(rows)
    return rows


def main() -> None:
    args = sys.argv[1:]
    count = int(args.pop(0)) if args and args[0].isdigit() else 15
    base = None
    if args[:1] == ["--base"]:
        base = args[1]
        args = args[2:]
    argv = args or ["--device", "cuda", "--num-blocks", "16384"]
    subjects = {"floor": (FLOOR, None), "floor_exit": (FLOOR_EXIT, None), "compare": (COMPARE, None)}
    if base:
        subjects["base"] = (COMPARE, base)
    rows = rounds(subjects, argv, count, on_round=lambda rows: print(
        " ".join(f"{name} {values[-1]:.3f}" for name, values in rows.items()), flush=True))
    print(f"\nafter `import torch`, {count} rounds ({' '.join(argv)}):")
    for name, values in rows.items():
        print(f"  {name:<10} median {statistics.median(values):.3f} s")
    for name, values in rows.items():
        for floor in ("floor", "floor_exit"):
            if not name.startswith("floor"):
                paired = statistics.median(v - f for v, f in zip(values, rows[floor]))
                print(f"  {name} over {floor}: {statistics.median(values) - statistics.median(rows[floor]):+.3f} s"
                      f" (paired median {paired:+.3f} s)")


if __name__ == "__main__":
    main()
