"""Diagnosis time against the diff's own time, per kind of fault, on a large cache.

`python bench/diagnose.py [--tokens N] [--device cpu|cuda] [--repeat R] [--only NAME,...]`

Each scenario is data: (name, candidate writer, spec changes, inputs). The baseline is the reference
writer (PyTorch emulation of aiter); the candidates are the planted faults of tests/faults/ (fast PyTorch
writers with the bytes of the real bugs) and, for the sparse case, reference-vllm. A benchmark, not a
test: it prints a table and asserts nothing. Default: 1M tokens (16384 blocks of 64), the size the
diagnosis must handle in about twice the diff's time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fp8check import diagnose  # noqa: E402
from fp8check.writers import registry as producers  # noqa: E402
from fp8check.compare import run_side  # noqa: E402
from fp8check.diff import diff_caches  # noqa: E402
from fp8check.inputs import Distribution, generate  # noqa: E402
from fp8check.spec import CacheSpec, ScaleFormat  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    name: str
    candidate: str  # producer name or file:PATH:FUNC
    spec_changes: dict = field(default_factory=dict)
    distribution: Distribution = Distribution.NORMAL


def fault(name: str) -> str:
    return f"file:{ROOT / 'tests' / 'faults' / name}.py:writer"


SCENARIOS = [
    Scenario("identical (ue8m0: aiter == vLLM)", "reference-vllm"),
    Scenario("rounding, sparse (fp32 scales, x*(1/s) vs x/s)", "reference-vllm", {"scale_fmt": ScaleFormat.FP32}),
    Scenario("integer-cast, every byte", fault("integer_cast_wrap")),
    Scenario("layout, every byte", fault("linear_layout")),
    Scenario("fp8-format, every byte", fault("other_format")),
    Scenario("scale-ratio, every byte (fp32 scales)", fault("divisor_240"), {"scale_fmt": ScaleFormat.FP32}),
    Scenario("unwritten, every fifth token", fault("skip_tokens")),
    Scenario("unknown, random bytes", "random"),
]


def random_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Garbage in every byte: the worst case, where no cause fits and every byte is looked at alone."""
    kv_cache.copy_(torch.randint(0, 256, kv_cache.shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(1)))


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1 << 20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated scenario name prefixes")
    args = parser.parse_args()
    device = torch.device(args.device)
    base_spec = CacheSpec(num_blocks=args.tokens // 64, block_size=64, head_dim=128)
    print(f"{args.tokens} tokens, {base_spec.num_blocks} blocks, {base_spec.num_blocks * base_spec.block_bytes / 1e6:.0f} MB"
          f" per cache, on {device} ({torch.get_num_threads()} threads), torch {torch.__version__}")
    # diagnose ms: alone, as a library caller may call it; +diff ms: given the DiffResult, as the CLI calls it
    print(f"{'scenario':52s} {'differ':>11s} {'diff ms':>8s} {'diagnose ms':>12s} {'ratio':>6s}"
          f" {'+diff ms':>9s} {'ratio':>6s}  top cause")
    chosen = [s for s in SCENARIOS if not args.only or any(s.name.startswith(p) for p in args.only.split(","))]
    baselines = {}
    for scenario in chosen:
        # set-up, not timed: inputs, the baseline (once per spec) and the candidate writers
        spec = base_spec.replace(**scenario.spec_changes)
        inputs = generate(spec, seed=0, distribution=scenario.distribution).to(device)
        key = (spec, scenario.distribution)
        if key not in baselines:
            baselines[key] = run_side(producers.resolve("reference"), spec, inputs, device)
        baseline = baselines[key]
        if scenario.candidate == "random":
            producer = producers.Producer("random", "random bytes", random_writer)
        else:
            producer = producers.resolve(scenario.candidate)
        candidate = run_side(producer, spec, inputs, device)
        # warm-up (first calls allocate and load kernels), then the timed runs
        diff_caches(spec, baseline.buffer, candidate.buffer)
        diff_s, diff = timed(lambda: diff_caches(spec, baseline.buffer, candidate.buffer), args.repeat)
        diag_s, found = timed(lambda: diagnose.diagnose(spec, baseline.buffer, candidate.buffer, inputs), args.repeat)
        given_s, given = timed(lambda: diagnose.diagnose(spec, baseline.buffer, candidate.buffer, inputs, diff=diff),
                               args.repeat)
        assert found.bytes == diff.diff_bytes
        assert given.to_json() == found.to_json()  # the same diagnosis either way (JSON: NaN-safe)
        top = found.top.category.value if found.top else "-"
        print(f"{scenario.name:52s} {diff.diff_bytes:11d} {diff_s * 1e3:8.0f} {diag_s * 1e3:12.0f}"
              f" {diag_s / diff_s:6.2f} {given_s * 1e3:9.0f} {given_s / diff_s:6.2f}  {top}", flush=True)
        del candidate, diff, found, given


if __name__ == "__main__":
    main()
