"""The benchmarks of fp8check, declared as data: one `Case` per figure (`bench/run.py` measures them).

A case names its figure, what is measured (`Command`: a fresh process; `Call`: a call in this process,
built by a set-up that is not timed; `Difference`: one figure less another; `Value`: a number the
set-up measures itself), the devices it runs on, and its target where docs/PERFORMANCE.md states one.
Sweeps (the fault scenarios of the diff and the diagnosis) are tuples of data expanded into cases, as
triton.testing's `Benchmark(x_vals=...)` declares a sweep.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MILLION = 1 << 20  # tokens: 16,384 blocks of 64, head_dim 128, 138 MB per cache
CPU, CUDA, BOTH = frozenset({"cpu"}), frozenset({"cuda"}), frozenset({"cpu", "cuda"})


@dataclass
class Context:
    device: str  # "cpu" or "cuda"
    memo: dict = field(default_factory=dict)  # set-up shared between cases (inputs, baseline caches)


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]  # after `python`, run from the repository root
    ok: frozenset[int] = frozenset({0})
    warmup: int = 0


@dataclass(frozen=True)
class Call:
    setup: Callable[[Context], Callable[[], object]]  # not timed; returns the call to time


@dataclass(frozen=True)
class Difference:
    measured: str  # the case names, on the same device
    less: str


@dataclass(frozen=True)
class Value:
    measure: Callable[[Context], float]
    unit: str


@dataclass(frozen=True)
class Target:
    at_most: float  # seconds; a ratio when `of` is given
    of: str | None = None  # the figure divided by this case's median (same device)
    devices: frozenset[str] = BOTH


@dataclass(frozen=True)
class Case:
    name: str
    what: Command | Call | Difference | Value
    devices: frozenset[str] = BOTH
    repeat: int = 5
    targets: tuple[Target, ...] = ()

    def target(self, device: str) -> Target | None:
        return next((t for t in self.targets if device in t.devices), None)


# --- set-ups (not timed) ---------------------------------------------------------------------------

def _spec(num_blocks: int, **changes):
    from fp8check.core.spec import CacheSpec

    return CacheSpec(num_blocks=num_blocks, block_size=64, head_dim=128).replace(**changes)


def _inputs(ctx: Context, spec):
    from fp8check.core.inputs import generate

    key = ("inputs", spec)
    if key not in ctx.memo:
        ctx.memo[key] = generate(spec, seed=0).to(ctx.device)
    return ctx.memo[key]


def _side(ctx: Context, spec, producer):
    from fp8check.run.compare import run_side

    return run_side(producer, spec, _inputs(ctx, spec), _device(ctx))


def _device(ctx: Context):
    import torch

    return torch.device(ctx.device)


def _producer(name: str, *, isolated: bool = False):
    from fp8check.producers import registry

    if name == "random":
        from fp8check.core.producer import Producer

        return Producer("random", "random bytes", _random_writer)
    return registry.resolve(name, isolation=registry.DEFAULT_ISOLATION if isolated else None)


def _random_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Garbage in every byte: no cause fits, every byte is looked at alone (the diagnosis' worst case)."""
    import torch

    noise = torch.randint(0, 256, kv_cache.shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    kv_cache.copy_(noise.to(kv_cache.device))


def compare_call(num_blocks: int, candidate: str) -> Call:
    def setup(ctx: Context):
        from fp8check.run.compare import compare

        spec = _spec(num_blocks)
        data, device = _inputs(ctx, spec), _device(ctx)
        baseline, cand = _producer("reference"), _producer(candidate)
        return lambda: compare(spec, baseline=baseline, candidate=cand, inputs=data, device=device)

    return Call(setup)


def writer_call(num_blocks: int, name: str, *, isolated: bool = False, threads: int | None = None) -> Call:
    """registry.run of one producer: a fresh poisoned cache, clones of the inputs, the write, the checks.
    `threads`: torch's CPU threads during the call (a forked child computes on one)."""
    def setup(ctx: Context):
        import torch

        from fp8check.producers import registry

        spec = _spec(num_blocks)
        data, device, producer = _inputs(ctx, spec), _device(ctx), _producer(name, isolated=isolated)

        def run():
            before = torch.get_num_threads()
            torch.set_num_threads(threads or before)
            try:
                return registry.run(producer, spec, data, device)
            finally:
                torch.set_num_threads(before)

        return run

    return Call(setup)


def hashed_inputs_call(num_blocks: int) -> Call:
    """`--inputs hashed`: K from a counter-based hash, computed where the cache lives."""
    def setup(ctx: Context):
        from fp8check.core.inputs import Distribution, generate

        spec = _spec(num_blocks)
        return lambda: generate(spec, seed=0, distribution=Distribution.HASHED, device=ctx.device)

    return Call(setup)


def tiling_call(num_blocks: int, tokens: int) -> Call:
    """The fixed Triton writer's kernel alone (no fresh buffer, no clones, no checks) at `tokens` tokens
    per program: 256 B of K read, 8 B of slot and 132 B written per token."""
    def setup(ctx: Context):
        from fp8check.core.cache import CacheBuffer
        from fp8check.producers.triton import check, launch

        spec = _spec(num_blocks)
        check(spec, _device(ctx))
        data, cache = _inputs(ctx, spec), CacheBuffer.allocate(spec, _device(ctx)).cache
        return lambda: launch(data.k, cache, data.slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg,
                              tokens=tokens)

    return Call(setup)


def _scenario_caches(ctx: Context, candidate: str, changes: dict):
    """(spec, baseline side, candidate side) at 1M tokens; one candidate cache is held at a time."""
    key = (candidate, tuple(sorted(changes.items())))
    held = ctx.memo.get("scenario")
    if held is None or held[0] != key:
        ctx.memo.pop("scenario", None)
        spec = _spec(MILLION // 64, **changes)
        base_key = ("baseline", spec)
        if base_key not in ctx.memo:
            ctx.memo[base_key] = _side(ctx, spec, _producer("reference"))
        ctx.memo["scenario"] = (key, (spec, ctx.memo[base_key], _side(ctx, spec, _producer(candidate))))
    return ctx.memo["scenario"][1]


def diff_call(candidate: str, changes: dict) -> Call:
    def setup(ctx: Context):
        from fp8check.core.diff import diff_caches

        spec, base, cand = _scenario_caches(ctx, candidate, changes)
        return lambda: diff_caches(spec, base.buffer, cand.buffer)

    return Call(setup)


def anchor_call(candidate: str, changes: dict, op: str) -> Call:
    """What moving the same bytes costs torch alone, for scale: `equal` (stops at nothing, one pass),
    `count` ((a != b).sum()), `copy` (one cache copied on the device)."""
    def setup(ctx: Context):
        import torch

        spec, base, cand = _scenario_caches(ctx, candidate, changes)
        a, b = base.buffer.buffer, cand.buffer.buffer
        out = torch.empty_like(a)
        return {"equal": lambda: torch.equal(a, b), "count": lambda: (a != b).sum(),
                "copy": lambda: out.copy_(a)}[op]

    return Call(setup)


def diagnosis_call(candidate: str, changes: dict) -> Call:
    """diagnose() given the diff's result, as the command line calls it after a differing diff."""
    def setup(ctx: Context):
        from fp8check.diagnose import diagnose
        from fp8check.core.diff import diff_caches

        spec, base, cand = _scenario_caches(ctx, candidate, changes)
        diff = diff_caches(spec, base.buffer, cand.buffer)
        data = _inputs(ctx, spec)
        found = diagnose(spec, base.buffer, cand.buffer, data, diff=diff)
        if found.bytes != diff.diff_bytes:
            raise SystemExit(f"diagnosis of {candidate}: {found.bytes} bytes attributed, {diff.diff_bytes} differ")
        return lambda: diagnose(spec, base.buffer, cand.buffer, data, diff=diff)

    return Call(setup)


def _html_report(ctx: Context) -> Path:
    """The HTML report of a 1M-token compare of the seed bug (integer_cast_wrap: its bytes, no interpreter),
    written once to a temporary file; render time and size are the cases below."""
    if "html" not in ctx.memo:
        import tempfile

        from fp8check.core.budget import Budget, check as check_budget
        from fp8check.run.compare import CompareCheck, CompareResult
        from fp8check.diagnose import diagnose
        from fp8check.core.diff import diff_caches
        from fp8check.core.outcome import single
        from fp8check.report import html

        spec, base, cand = _scenario_caches(ctx, *_SEED_BUG[1:])
        data = _inputs(ctx, spec)
        diff = diff_caches(spec, base.buffer, cand.buffer)
        result = CompareResult(spec, data, ctx.device, base, cand, diff)
        decided = CompareCheck(result, diagnose(spec, base.buffer, cand.buffer, data, diff=diff),
                               check_budget(Budget(), diff, base.buffer, cand.buffer))
        run = single("compare", decided, 0.0)
        path = Path(tempfile.mkdtemp(prefix="fp8check-bench-")) / "report.html"
        path.write_text(html.render(run))
        ctx.memo["html"] = (run, path)
    return ctx.memo["html"]


def html_render_call(ctx: Context):
    from fp8check.report import html

    run, _ = _html_report(ctx)
    return lambda: html.render(run)


def html_size(ctx: Context) -> float:
    return _html_report(ctx)[1].stat().st_size / 1e6


def html_load(ctx: Context, loads: int = 5) -> float:
    """Median seconds from navigation to the first frame after the load event, in headless Chromium
    (tests/browser.py), after one load to warm the browser up."""
    import importlib.util
    import statistics
    import time

    found = importlib.util.spec_from_file_location("fp8check_test_browser", ROOT / "tests" / "browser.py")
    browser = importlib.util.module_from_spec(found)
    found.loader.exec_module(browser)
    if browser.unavailable():
        raise SystemExit(f"no browser here: {browser.unavailable()}")
    path = _html_report(ctx)[1]
    seconds = []
    with browser.browser() as launched:
        page = launched.new_page(viewport={"width": 1300, "height": 900})
        for _ in range(loads + 1):
            start = time.perf_counter()
            page.goto(path.as_uri(), wait_until="load")
            page.evaluate("() => new Promise(done => requestAnimationFrame(() => done()))")
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds[1:])


PEAK = """
import json, sys, torch
from pathlib import Path
from fp8check.run.compare import compare
from fp8check.core.inputs import generate
from fp8check.core.spec import CacheSpec
from fp8check.producers import registry

def status(key):
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(key + ":"))
    return int(line.split()[1]) * 1024

spec = CacheSpec(num_blocks=int(sys.argv[1]), block_size=64, head_dim=128)
data = generate(spec, seed=0)
baseline, candidate = registry.resolve("reference"), registry.resolve(sys.argv[2])
Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from the resident set
before = status("VmRSS")
compare(spec, baseline=baseline, candidate=candidate, inputs=data, device=torch.device("cpu"))
cache = spec.num_blocks * spec.block_bytes
given = data.k.numel() * data.k.element_size() + data.slot_mapping.numel() * data.slot_mapping.element_size()
print(json.dumps((status("VmHWM") - before) / (2 * cache + given)))
"""


def peak_memory(num_blocks: int, candidate: str) -> Value:
    """A compare's peak resident-set growth over the bytes of its two caches and its inputs, in a fresh
    process (Linux: /proc/self/clear_refs and VmHWM). A child's shared-memory cache counts once the parent
    copies it out."""
    def measure(ctx: Context) -> float:
        done = subprocess.run([sys.executable, "-c", PEAK, str(num_blocks), candidate], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        return float(json.loads(done.stdout))

    return Value(measure, "x")


# --- the table -------------------------------------------------------------------------------------

FILE_WRITER = f"file:{ROOT / 'tests' / 'plugins' / 'corrupt_one_byte.py'}:writer"  # aiter's bytes, one flipped


def _fault(name: str) -> str:
    return f"file:{ROOT / 'tests' / 'faults' / name}.py:writer"


# (scenario, candidate writer, spec changes): the baseline is `reference`; the faults are the planted
# writers of tests/faults/ (the bytes of real bugs), run in this process
SCENARIOS = (
    ("identical (ue8m0: aiter == vLLM)", "reference-vllm", {}),
    ("rounding, sparse (fp32 scales)", "reference-vllm", {"scale_fmt": "fp32"}),
    ("integer-cast, every byte (the seed bug)", _fault("integer_cast_wrap"), {}),
    ("layout, every byte", _fault("linear_layout"), {}),
    ("fp8-format, every byte", _fault("other_format"), {}),
    ("scale-ratio, every byte (fp32 scales)", _fault("divisor_240"), {"scale_fmt": "fp32"}),
    ("unwritten, every fifth token", _fault("skip_tokens"), {}),
    ("unknown, random bytes", "random", {}),
)
DIFF_TARGETS = {  # seconds, where the docs state one
    "identical (ue8m0: aiter == vLLM)": (Target(0.3e-3, devices=CUDA),),
    "integer-cast, every byte (the seed bug)": (Target(0.5e-3, devices=CUDA),),
}


def _changes(changes: dict) -> dict:
    from fp8check.core.spec import ScaleFormat

    return {key: ScaleFormat(value) if key == "scale_fmt" else value for key, value in changes.items()}


def _scenario_cases() -> list[Case]:
    cases = []
    for name, candidate, changes in SCENARIOS:
        cases.append(Case(f"diff, 1M tokens, {name}", _scenario_call(diff_call, candidate, changes), repeat=5,
                          targets=DIFF_TARGETS.get(name, ())))
        if name.startswith("identical"):
            continue  # identical caches are never diagnosed
        cases.append(Case(f"diagnosis, 1M tokens, {name}", _scenario_call(diagnosis_call, candidate, changes), repeat=3,
                          targets=(Target(2.0, of=f"diff, 1M tokens, {name}"),)))
    return cases


def _scenario_call(make, candidate: str, changes: dict, *args) -> Call:
    """A scenario's Call; the spec changes become fp8check's enums only at set-up (fp8check is imported then)."""
    return Call(lambda ctx: make(candidate, _changes(changes), *args).setup(ctx))


_IDENTICAL, _SEED_BUG = SCENARIOS[0], SCENARIOS[2]
ANCHORS = (
    Case("anchor: torch.equal, 1M tokens, identical caches", _scenario_call(anchor_call, *_IDENTICAL[1:], "equal")),
    Case("anchor: (a != b).sum(), 1M tokens, the seed bug", _scenario_call(anchor_call, *_SEED_BUG[1:], "count")),
    Case("anchor: copy of one 1M-token cache", _scenario_call(anchor_call, *_IDENTICAL[1:], "copy")),
)


CASES: tuple[Case, ...] = (
    Case("import floor: torch and triton (fresh process)", Command(("-c", "import torch, triton")), CPU),
    Case("fp8check compare, default spec (fresh process)", Command(("-m", "fp8check", "compare"), warmup=1), CPU,
         targets=(Target(1.2),)),
    Case("compare(), default spec, triton vs reference", compare_call(3, "triton"), CPU, repeat=10),
    Case("compare(), 1M tokens, triton vs reference", compare_call(MILLION // 64, "triton"), CUDA,
         targets=(Target(5e-3),)),
    Case("inputs, 1M tokens, hashed K on the device", hashed_inputs_call(MILLION // 64), CUDA, targets=(Target(1e-3),)),
    Case("writer reference, 1M tokens", writer_call(MILLION // 64, "reference"), repeat=3,
         targets=(Target(0.5e-3, devices=CUDA),)),
    Case("writer triton, 1M tokens", writer_call(MILLION // 64, "triton"), CUDA),
    *(Case(f"triton writer kernel, 1M tokens, {tokens} token(s) per program", tiling_call(MILLION // 64, tokens),
           CUDA, repeat=20) for tokens in (1, 2, 4, 8, 16, 32, 64)),
    *_scenario_cases(),
    *ANCHORS,
    Case("writer from a file, default spec, in this process (1 thread)",
         writer_call(3, FILE_WRITER, threads=1), CPU, repeat=7),
    Case("writer from a file, default spec, isolated (child process)",
         writer_call(3, FILE_WRITER, isolated=True), CPU, repeat=7),
    Case("isolation overhead per producer (isolated - in this process)",
         Difference("writer from a file, default spec, isolated (child process)",
                    "writer from a file, default spec, in this process (1 thread)"), CPU, targets=(Target(0.3),)),
    Case("peak memory of a compare, 8000 blocks, file writer isolated (x caches + inputs)",
         peak_memory(8000, FILE_WRITER), CPU, targets=(Target(3.0),)),
    Case("HTML report, 1M tokens, the seed bug: render()", Call(html_render_call), repeat=3),
    Case("HTML report, 1M tokens, the seed bug: size", Value(html_size, " MB"), targets=(Target(5.0),)),
    Case("HTML report, 1M tokens, the seed bug: headless Chromium, load to first frame", Value(html_load, " s"),
         targets=(Target(2.0),)),
    Case("fp8check parity --config seed-parity (fresh process)",
         Command(("-m", "fp8check", "parity", "--config", "seed-parity")), CPU, repeat=3,
         targets=(Target(15.0),)),
    Case("fp8check gate configs/ci.toml (fresh process)",
         Command(("-m", "fp8check", "gate", "configs/ci.toml", "--quiet")), CPU, repeat=1, targets=(Target(60.0),)),
)
