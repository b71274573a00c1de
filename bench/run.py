"""`make bench`: measure the cases of bench/cases.py on this machine and print each figure with its target.

    python bench/run.py [--device cpu|cuda] [--only TEXT ...] [--repeat N] [--out FILE.json]

`--only TEXT` (repeatable) keeps the cases whose name contains one of the texts (a `Difference` or a
ratio target also runs the cases it needs). `--repeat` overrides every case's number of runs. `--out` also writes the
figures, the machine and the versions as JSON (for a CI to keep). A benchmark, not a test: a missed
target is printed, the exit code stays 0; a command that fails stops the run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import timer  # noqa: E402
from cases import CASES, ROOT, Call, Case, Command, Context, Difference, Value  # noqa: E402


def machine() -> dict:
    import torch
    import triton

    about = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
             "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
             "load average (1 min) at the start": round(os.getloadavg()[0], 2)}
    if torch.cuda.is_available():
        about["gpu"] = torch.cuda.get_device_name()
    return about


def chosen(only: list[str], device: str) -> list[Case]:
    """The cases asked for on this device, with the cases their figures are computed from, in table order."""
    by_name = {case.name: case for case in CASES}
    wanted = {case.name for case in CASES if device in case.devices
              and (not only or any(text in case.name for text in only))}
    for name in list(wanted):
        case = by_name[name]
        if isinstance(case.what, Difference):
            wanted |= {case.what.measured, case.what.less}
        target = case.target(device)
        if target is not None and target.of is not None:
            wanted.add(target.of)
    return [case for case in CASES if case.name in wanted]


def measure(case: Case, ctx: Context, repeat: int | None, done: dict[str, float]) -> tuple[float, timer.Timing | None]:
    """(the figure, its timing where it is one): seconds for times, the case's unit for a Value."""
    runs = repeat or case.repeat
    what = case.what
    if isinstance(what, Command):
        t = timer.process(what.argv, repeat=runs, cwd=ROOT, ok=what.ok, warmup=what.warmup)
        return t.median, t
    if isinstance(what, Call):
        t = timer.call(what.setup(ctx), repeat=runs, cuda=ctx.device == "cuda")
        return t.median, t
    if isinstance(what, Difference):
        return done[what.measured] - done[what.less], None
    if isinstance(what, Value):
        return what.measure(ctx), None
    raise TypeError(f"unknown measurement {what!r}")


def described(case: Case, t: timer.Timing | None) -> str:
    if isinstance(case.what, Difference):
        return "difference of the medians above"
    if isinstance(case.what, Value):
        return "the case's own measure"
    if t is None:
        return "one fresh process"
    cpu = "" if t.cpu is None else f", CPU {show(t.cpu)}"
    return f"median of {t.runs}, best {show(t.best)}{cpu}"


def show(seconds: float) -> str:
    if abs(seconds) >= 1:
        return f"{seconds:.2f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def show_target(seconds: float) -> str:
    return f"{seconds:g} s" if seconds >= 1 else f"{seconds * 1e3:g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:g} us"


def verdict(case: Case, device: str, figure: float, done: dict[str, float]) -> str:
    target = case.target(device)
    if target is None:
        return ""
    if target.of is not None:
        ratio = figure / done[target.of]
        state = "met" if ratio <= target.at_most else "MISSED"
        return f"{ratio:.2f}x of '{target.of}', target <= {target.at_most:g}x: {state}"
    limit = f"{target.at_most:g}{case.what.unit}" if isinstance(case.what, Value) else show_target(target.at_most)
    return f"target <= {limit}: {'met' if figure <= target.at_most else 'MISSED'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run the cases whose name contains TEXT (repeatable)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per case (default: each case's own)")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    about = machine()
    print(", ".join(f"{key} {value}" for key, value in about.items()), f"| device {args.device}", flush=True)
    ctx, done, rows = Context(args.device), {}, []
    for case in chosen(args.only, args.device):
        figure, timing = measure(case, ctx, args.repeat, done)
        done[case.name] = figure
        shown = f"{figure:.2f}{case.what.unit}" if isinstance(case.what, Value) else show(figure)
        judged = verdict(case, args.device, figure, done)
        print(f"{case.name:84s} {shown:>9s}  ({described(case, timing)}){'  ' + judged if judged else ''}",
              flush=True)
        row = {"case": case.name, "figure": figure, "unit": case.what.unit.strip() if isinstance(case.what, Value) else "s"}
        if timing is not None:
            row |= {"best": timing.best, "cpu": timing.cpu, "runs": timing.runs}
        rows.append(row | {"verdict": judged})
    if args.out is not None:
        args.out.write_text(json.dumps({"machine": about, "device": args.device, "figures": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
