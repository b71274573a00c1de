"""How much of CUDA's start in a process holds the GIL: if it mostly waits with the GIL released, a
command can create the context in a thread while its main thread imports and resolves (issue 13).

    python3 bench/gpu_context.py            (on a GPU machine; one fresh process per measurement)

Prints, for `torch.cuda.init()` and the first allocation (`torch.zeros(1, device='cuda')`) run in a
thread: their wall time and the share of it the main thread could still run Python (a busy loop's
progress against its speed alone). Then ROUNDS fresh processes each of the serial floor (imports, then
the context) and of the overlapped one (torch imported, the context started in a thread, then the
other imports, then joined), and their medians.

Caveat (fifth session): the share counts only the busy loop's samples that lie wholly inside a phase, so
it misses a stall that spans the phase's start. `torch.cuda.init()` runs cuInit holding the GIL: in
bench/timeline.py the main thread stood 184-191 ms in `Thread.start` while it ran. warmup.driver_start
now starts the driver through ctypes, GIL released, before torch does.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

PROBE = r'''
import time, threading
import torch

def spin(seconds):
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n

rate = spin(0.2) / 0.2  # loop iterations per second with the GIL to itself
phases = []
def work():
    for name, fn in (("torch.cuda.init()", torch.cuda.init), ("torch.zeros(1, device='cuda')", lambda: torch.zeros(1, device="cuda"))):
        start = time.perf_counter()
        fn()
        phases.append((name, start, time.perf_counter()))
t = threading.Thread(target=work)
marks = []
t.start()
while t.is_alive():
    start = time.perf_counter()
    n = spin(0.002)
    marks.append((start, time.perf_counter(), n))
t.join()
for name, a, b in phases:
    done = sum(n for s, e, n in marks if s >= a and e <= b)
    span = sum(e - s for s, e, n in marks if s >= a and e <= b)
    share = done / (rate * span) if span else float("nan")
    print(f"{name:<34} {1e3 * (b - a):8.1f} ms   main thread ran Python {100 * share:5.1f}% of it")
'''

SERIAL = "import torch, triton, click, rich.console, fp8check.cli; torch.zeros(1, device='cuda')"
OVERLAP = ("import threading, torch; t = threading.Thread(target=lambda: torch.zeros(1, device='cuda')); t.start();"
           " import triton, click, rich.console, fp8check.cli; t.join()")


def wall(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    for _ in range(2):
        subprocess.run([sys.executable, "-c", PROBE], check=True)
    walls: dict[str, list[float]] = {"serial floor": [], "context in a thread": []}
    for _ in range(rounds):
        walls["serial floor"].append(wall(SERIAL))
        walls["context in a thread"].append(wall(OVERLAP))
    diffs = [b - a for a, b in zip(walls["serial floor"], walls["context in a thread"])]
    for name, values in walls.items():
        print(f"{name:<22} median {statistics.median(values):.3f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"paired median difference (thread - serial): {statistics.median(diffs):+.3f} s over {rounds} rounds")


if __name__ == "__main__":
    main()
