"""aiter's real C++ op, built from an aiter source for the CPU (`aiter-src:PATH`), against fp8check's
producers over the FP8 formats, scale formats, layouts and input kinds: one line per (candidate, case)
group with how many cases were IDENTICAL, and the differing bytes otherwise.

    python bench/aiter_src_table.py SOURCE [--candidates reference,triton,triton-buggy] [--slots ...]
"""

from __future__ import annotations

import argparse
import itertools
import platform
import shutil
import subprocess
import sys
import time

from fp8check.api import compare_writers

FINITE_INPUTS = ("normal", "uniform", "outliers", "ue8m0-boundary", "ties", "tiny", "specials", "mixed", "hashed")


def versions(baseline: str) -> str:
    """One line naming what the table ran with: the source, Python, torch, Triton and the clang on PATH."""
    import torch
    import triton

    clangs = [name for name in ("clang-22", "clang-21", "clang-20", "clang") if shutil.which(name)]
    clang = (subprocess.run([clangs[0], "--version"], capture_output=True, text=True).stdout.splitlines() or ["?"])[0]
    return (f"{baseline}; Python {platform.python_version()}, torch {torch.__version__}, Triton {triton.__version__},"
            f" {clang if clangs else 'no clang on PATH'}, {platform.machine()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="an aiter checkout or an unpacked amd-aiter wheel's aiter_meta/ folder")
    parser.add_argument("--candidates", default="reference")
    parser.add_argument("--inputs", default=",".join(FINITE_INPUTS))
    parser.add_argument("--slots", default="sequential")
    parser.add_argument("--specials-inf-nan", action="store_true")
    parser.add_argument("--expect-identical", action="store_true", help="exit 1 unless every case is IDENTICAL")
    args = parser.parse_args()
    baseline = f"aiter-src:{args.source}"
    print(versions(baseline), flush=True)  # the table's figures hold for these versions only
    failures = 0
    for candidate in args.candidates.split(","):
        for fp8, scale_fmt, layout in itertools.product(("e4m3fn", "e4m3fnuz"), ("ue8m0", "fp32"), ("shuffle", "linear")):
            identical, diffs, started = 0, [], time.perf_counter()
            cases = list(itertools.product(args.inputs.split(","), args.slots.split(",")))
            for inputs, slots in cases:
                result = compare_writers(candidate, baseline, fp8=fp8, scale_fmt=scale_fmt, layout=layout,
                                         inputs=inputs, slots=slots, device="cpu",
                                         specials_inf_nan=args.specials_inf_nan)
                identical += result.identical
                if not result.identical:
                    diffs.append(f"{inputs}/{slots}: {result.diff_bytes}")
            failures += len(diffs)
            print(f"{candidate:14s} {fp8:9s} {scale_fmt:6s} {layout:8s} {identical:3d}/{len(cases)} IDENTICAL"
                  f"  ({time.perf_counter() - started:.1f} s){'  DIFF ' + ', '.join(diffs) if diffs else ''}",
                  flush=True)
    return 1 if (args.expect_identical and failures) else 0


if __name__ == "__main__":
    sys.exit(main())
