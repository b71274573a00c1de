"""A grid run at once on the CPU writes the bytes Triton's sequential interpreter writes (grid_interpreter.py).

Every test runs a kernel twice on copies of the same tensors, program by program (Triton's interpreter as
it ships, with fp8check's exact FP8 conversion) and grid-at-once, and asserts every byte equal; and
whether the grid ran at once or was handed to the sequential interpreter, with the reason."""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run
from hypothesis import given, settings
from hypothesis import strategies as st

from fp8check.core.inputs import generate
from fp8check.core.spec import CacheSpec, FP8Format, Layout, ScaleFormat
from fp8check.triton_cpu import interpreter, known_answers
from fp8check.producers import registry
from fp8check.triton_cpu.grid import available, grid_at_once

sys.path.insert(0, str(Path(__file__).parent / "kernels"))
import grid_cases as cases  # noqa: E402

KERNELS = Path(__file__).parent / "kernels"
OPS = KERNELS / "rocm_indexer_ops.py"

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter runs only")


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(-1).view(torch.uint8)


def needs(fmt: FP8Format) -> None:
    ok, reason = known_answers.check(fmt)
    if not ok:  # Triton 3.6's interpreter has no fnuz conversion at all
        pytest.skip(reason)


def differential(launch, *tensors: torch.Tensor):
    """launch(*copies) program by program and grid-at-once: every byte of every tensor equal. Returns the
    grid-at-once run's GridRun records."""
    for fmt in FP8Format:
        known_answers.check(fmt)  # the exact conversion in both runs
    sequential = [t.clone() for t in tensors]
    with interpreter.cpu_kernels():
        launch(*sequential)
    at_once = [t.clone() for t in tensors]
    with interpreter.cpu_kernels(), grid_at_once() as runs:
        launch(*at_once)
    for index, (a, b) in enumerate(zip(sequential, at_once)):
        assert torch.equal(_bytes(a), _bytes(b)), f"tensor {index}: {(_bytes(a) != _bytes(b)).sum()} bytes differ"
    return runs


def ran_at_once(runs) -> bool:
    return bool(runs) and all(run.sequential_reason is None for run in runs)


def test_available_on_this_triton():
    assert available() == (True, "grid-at-once interpreter available")


# ---- the writers fp8check ships and loads in its tests ------------------------------------------------------
WRITER_SPECS = [
    CacheSpec(num_blocks=5, block_size=64, head_dim=128),
    CacheSpec(num_blocks=2, block_size=64, head_dim=128, fp8=FP8Format.E4M3FNUZ, scale_fmt=ScaleFormat.UE8M0),
    CacheSpec(num_blocks=2, block_size=16, head_dim=128, layout=Layout.SHUFFLE),
    CacheSpec(num_blocks=4, block_size=1, head_dim=128, fp8=FP8Format.E4M3FNUZ),
]


def _write(name: str, spec: CacheSpec, padding: int):
    needs(spec.fp8)
    producer = registry.resolve(name, fp8=spec.fp8, isolation=None)
    producer.check(spec, torch.device("cpu"))
    data = generate(spec, seed=5)
    slots = data.slot_mapping.clone()
    slots[::max(1, slots.numel() // max(1, padding))][:padding] = -1  # padding tokens return early
    kwargs = {"fp8_dtype": spec.fp8.torch_dtype()} if "fp8_dtype" in producer.keywords else {}
    if "layout" in producer.keywords:
        kwargs["layout"] = spec.layout.value
    cache = torch.full((spec.num_blocks * spec.block_bytes,), 0x5B, dtype=torch.uint8)

    def launch(k, cache, slots):
        producer.writer(k, cache.view(spec.num_blocks, spec.block_size, -1), slots, spec.quant_block_size,
                        spec.scale_fmt.writer_arg, **kwargs)

    return differential(launch, data.k, cache, slots)


@pytest.mark.parametrize("spec", WRITER_SPECS, ids=lambda s: f"{s.fp8.value}-{s.scale_fmt.value}-{s.layout.value}-b{s.block_size}")
@pytest.mark.parametrize("padding", [0, 5])
def test_vllm_style_writer_one_program_per_token(spec, padding):
    runs = _write(f"vllm-file:{OPS}", spec, padding)
    assert ran_at_once(runs), [r.note() for r in runs]
    assert runs[0].programs == spec.num_slots


@pytest.mark.parametrize("spec", WRITER_SPECS[:3], ids=["e4m3fn", "fnuz-ue8m0", "shuffle"])
def test_fp8checks_own_triton_writer(spec):
    runs = _write("triton", spec, padding=3)
    assert len(runs) == 1


# ---- readers -------------------------------------------------------------------------------------------------
def _reader_inputs(ctx: list[int], next_n: int, heads: int = 8, head_dim: int = 128, block_size: int = 64):
    g = torch.Generator().manual_seed(sum(ctx) + next_n)
    blocks = -(-max(ctx) // block_size) * len(ctx)
    q = (torch.randn(len(ctx), next_n, heads, head_dim, generator=g) * 2).to(torch.float8_e4m3fn)
    kv = torch.randint(0, 256, (blocks, block_size, head_dim + 4), dtype=torch.uint8, generator=g)
    flat = kv.view(blocks, -1)
    flat[:, : block_size * head_dim] &= 0x77  # no NaN codes
    flat[:, block_size * head_dim:].view(torch.float32).copy_(torch.rand(blocks, block_size, generator=g) + 0.5)
    weights = torch.randn(len(ctx) * next_n, heads, generator=g)
    table = torch.randperm(blocks, generator=g).to(torch.int32).view(len(ctx), -1)
    spec = CacheSpec(num_blocks=blocks, block_size=block_size, head_dim=head_dim)
    return spec, (q, kv, weights, torch.tensor(ctx, dtype=torch.int32), table)


@pytest.mark.parametrize("ctx,next_n", [([70, 5], 1), ([130], 2)])
def test_vllm_style_triton_reader_logits(ctx, next_n):
    spec, tensors = _reader_inputs(ctx, next_n)
    reader = registry.resolve_reader(f"vllm-file:{OPS}:rocm_fp8_paged_mqa_logits_triton", spec=spec, isolation=None)
    reader.check(spec, torch.device("cpu"))
    out = torch.zeros(len(ctx) * next_n, max(ctx), dtype=torch.float32)

    def launch(out, *args):
        out.copy_(reader.fn(*args, max(ctx)))

    runs = differential(launch, out, *tensors)
    assert ran_at_once(runs), [r.note() for r in runs]


# ---- control flow ----------------------------------------------------------------------------------------------
def test_early_return_in_some_programs():
    x = torch.tensor([1.5, -1.0, 2.0, -3.0, 0.25, 4.0, -0.5, 3.0])
    out = torch.full((8 * 16,), -9.0)
    runs = differential(lambda x, out: cases.early_return[(8,)](x, out, BLOCK=16), x, out)
    assert ran_at_once(runs) and runs[0].batches == 2  # the returning programs and the others


def test_loop_bounds_that_differ_between_programs():
    lengths = torch.tensor([9, 9, 12, 0, 5, 9, 11, 10, 9, 2], dtype=torch.int32)
    x = torch.randn(16 * 32, generator=torch.Generator().manual_seed(1))
    out = torch.zeros(10 * 32)
    runs = differential(lambda n, x, out: cases.ragged_loop[(10,)](n, x, out, STEP=2, BLOCK=32), lengths, x, out)
    assert ran_at_once(runs), [r.note() for r in runs]


def test_data_dependent_while_loop():
    x = torch.tensor([0.5, 3.0, 10.0, 100.0, 2.5, 1e6, 9.0, 0.0])
    out, count = torch.zeros(8), torch.zeros(8, dtype=torch.int32)
    runs = differential(lambda x, o, c: cases.halving_while[(8,)](x, o, c), x, out, count)
    assert ran_at_once(runs)


@pytest.mark.parametrize("m,n", [(4, 8), (16, 32), (8, 128)])
def test_reductions_reduce_in_the_sequential_order(m, n):
    programs = 6
    x = torch.randn(programs * m * n, generator=torch.Generator().manual_seed(m * n)) * 1000
    out = torch.zeros(programs * (2 * m + 2 * n + 6))
    runs = differential(lambda x, out: cases.reductions[(programs,)](x, out, M=m, N=n), x, out)
    assert ran_at_once(runs), [r.note() for r in runs]


@pytest.mark.parametrize("m,n", [(16, 64), (64, 16), (8, 128)])
def test_reductions_over_transposed_broadcast_and_shared_blocks(m, n):
    g = torch.Generator().manual_seed(m)
    x, shared = torch.randn(5 * m * n, generator=g) * 1000, torch.randn(m * n, generator=g) * 10
    out = torch.zeros(5 * 16 * 128)
    runs = differential(lambda x, u, o: cases.reductions_over_layouts[(5,)](x, u, o, M=m, N=n), x, shared, out)
    assert ran_at_once(runs)


@pytest.mark.parametrize("as_fp8", [False, True])
def test_dot_on_a_two_dimensional_grid(as_fp8):
    m, n, k = 16, 16, 32
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(3 * m * k, generator=g) * 4, torch.randn(2 * n * k, generator=g) * 4
    out = torch.zeros(3 * m * 2 * n)
    runs = differential(lambda a, b, o: cases.tiled_dot[(3, 2)](a, b, o, M=m, N=n, K=k, AS_FP8=as_fp8), a, b, out)
    assert ran_at_once(runs)


@pytest.mark.parametrize("fmt", list(FP8Format), ids=lambda f: f.value)
def test_fp8_conversion_both_formats_with_masks(fmt):
    needs(fmt)
    x = torch.randn(12 * 100, generator=torch.Generator().manual_seed(3)) * 300
    x[::37] = torch.tensor([float("nan"), float("inf"), -0.0, 448.0, 1e-9] * 7)[: x[::37].numel()]
    out, scales = torch.zeros(12 * 100, dtype=torch.uint8), torch.zeros(12)

    def launch(x, out, scales):
        cases.quantize_rows[(12,)](x, out.view(fmt.torch_dtype()), scales, 100, FMT_MAX=fmt.max, BLOCK=128)

    assert ran_at_once(differential(launch, x, out, scales))


def test_a_store_every_program_makes_alike_runs_at_once():
    out, flags = torch.zeros(1), torch.zeros(9, dtype=torch.int32)
    runs = differential(lambda o, f: cases.same_store_everywhere[(9,)](o, f), out, flags)
    assert ran_at_once(runs)


# ---- what runs sequentially, and why ---------------------------------------------------------------------------
def test_atomics_run_sequentially():
    counter, x = torch.zeros(1), torch.arange(10, dtype=torch.float32)
    runs = differential(lambda c, x: cases.atomic_count[(10,)](c, x), counter, x)
    assert runs[0].sequential_reason == "tl operation atomic_rmw is not run grid-at-once"


def test_programs_that_read_what_others_write_run_sequentially():
    x = torch.zeros(17)
    runs = differential(lambda x: cases.prefix_chain[(16,)](x), x)
    assert runs[0].sequential_reason == "a program loads bytes that the grid stores (programs not independent)"
    assert x.clone().numel() == 17


def test_two_programs_storing_one_byte_run_sequentially():
    out = torch.zeros(8)
    runs = differential(lambda o: cases.last_writer_wins[(16,)](o), out)
    assert runs[0].sequential_reason == "two programs store to the same byte (their order decides it)"


def test_a_kernel_error_is_the_sequential_interpreters_and_nothing_stays_written():
    from triton.runtime.errors import InterpreterError

    x = torch.zeros(256, dtype=torch.int32)
    x[:4] = torch.tensor([2, 0, 3, 1])
    errors = []
    for context in (_nothing, grid_at_once):
        copy = x.clone()
        with interpreter.cpu_kernels(), context():
            with pytest.raises(InterpreterError) as caught:
                cases.bad_shape[(4,)](copy, 8)
        errors.append((str(caught.value).split("\n")[0], copy))
    assert errors[0][0] == errors[1][0]
    assert torch.equal(errors[0][1], errors[1][1])


class _nothing:
    def __enter__(self):
        return []

    def __exit__(self, *exc):
        return False


# ---- loop variables that differ between programs: Python's int arithmetic, per program ---------------------
_OPERATORS = ["+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>", "<", "<=", ">", ">=", "==", "!="]


@settings(max_examples=200)
@given(left=st.lists(st.integers(-2000, 2000), min_size=1, max_size=4), right=st.integers(-70, 70),
       operator=st.sampled_from(_OPERATORS), side=st.sampled_from(["vector op int", "int op vector", "vector op vector"]))
def test_program_ints_compute_what_python_ints_compute(left, right, operator, side):
    from fp8check.triton_cpu.grid_language import ProgramBools, ProgramInts, Unsupported

    rights = [right + i for i in range(len(left))]
    expected = []
    for a, b in zip(left, rights if side == "vector op vector" else [right] * len(left)):
        try:
            expected.append(eval(f"b {operator} a" if side == "int op vector" else f"a {operator} b"))
        except (ZeroDivisionError, ValueError):
            return  # Python raises: the interpreter's run raises too
    vector = ProgramInts(np.array(left, dtype=np.int64))
    other = ProgramInts(np.array(rights, dtype=np.int64))
    expression = {"vector op int": f"vector {operator} right", "int op vector": f"right {operator} vector",
                  "vector op vector": f"vector {operator} other"}[side]
    try:
        got = eval(expression, {}, {"vector": vector, "right": right, "other": other})
    except Unsupported:
        assert operator in ("<<", ">>", "*")  # outside the exact int64 range: sequential instead
        return
    kind = ProgramBools if isinstance(expected[0], bool) else ProgramInts
    assert type(got) is kind
    assert got.values.tolist() == expected


# ---- random kernels from the supported subset ------------------------------------------------------------------
_UNARY = ["tl.abs({})", "-({})", "tl.exp2(tl.minimum({}, 8.0))", "tl.ceil({})", "tl.maximum({}, 0.5)",
          "({}).to(tl.float8e4nv).to(tl.float32)", "tl.sqrt(tl.abs({}))", "(({}) * 100.0).to(tl.int32).to(tl.float32)",
          "tl.reshape(tl.dot(tl.reshape({} + x * 0.0, (4, 4)), tl.reshape(y, (4, 4))), (16,))",
          "tl.sum(({} + x * 0.0)[:, None] * y[None, :], axis=1)", "tl.max(({} + x * 0.0)[:, None] - x[None, :], axis=0)",
          "tl.cumsum({} + x * 0.0, axis=0)", "tl.where(tl.arange(0, 16) % 3 == 0, {}, 0.25)"]


def _interpreter_knows_fp8e4b8() -> bool:
    """Triton 3.6's interpreter has no fp8e4b8 type for a kernel to name (SPEC.md section 9)."""
    import inspect

    from triton.runtime import interpreter as triton_interpreter

    return "fp8e4b8" in inspect.getsource(triton_interpreter._patch_lang_core)


if _interpreter_knows_fp8e4b8():
    _UNARY.append("({}).to(tl.float8e4b8).to(tl.float32)")
_BINARY = ["({} + {})", "({} - {})", "({} * {})", "({} / ({} * {} + 1.0))", "tl.where({} > {}, {}, -1.5)",
           "tl.minimum({}, {})"]
_SCALAR = ["tl.sum({} + x * 0.0, axis=0)", "tl.max({} + x * 0.0, axis=0)", "tl.min({} + x * 0.0, axis=0)"]


@st.composite
def _expressions(draw, depth=0):
    leaves = ["x", "y", "pid_f", "s", "(x * s)"]
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(leaves))
    kind = draw(st.sampled_from(["unary", "binary", "scalar"]))
    if kind == "unary":
        return draw(st.sampled_from(_UNARY)).format(draw(_expressions(depth + 1)))
    if kind == "scalar":
        return "(" + draw(st.sampled_from(_SCALAR)).format(draw(_expressions(depth + 1))) + " + x * 0.0)"
    template = draw(st.sampled_from(_BINARY))
    return template.format(*(draw(_expressions(depth + 1)) for _ in range(template.count("{}"))))


_SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n - pid % {modulus}
    x = tl.load(x_ptr + pid * BLOCK + offs, mask=mask, other={other})
    y = tl.load(y_ptr + (pid * 7) % {programs} * BLOCK + offs)
    pid_f = pid.to(tl.float32)
    s = tl.load(x_ptr + pid)
    if s > {threshold}:
        {early}
    for i in tl.range(pid % 2, {loop_end}, 2):
        x = x * 0.5 + y * i
    r = {expression}
    tl.store(out_ptr + pid * BLOCK + offs, r, mask=mask)
'''
_MODULES = Path(tempfile.mkdtemp(prefix="fp8check-grid-kernels-"))


@settings(max_examples=25)
@given(expression=_expressions(), programs=st.integers(2, 9), modulus=st.integers(1, 5),
       threshold=st.sampled_from([-10.0, 0.0, 0.5]), early=st.sampled_from(["return", "x = x + 1.0"]),
       loop_end=st.sampled_from(["3", "n - pid * 3", "pid"]), other=st.sampled_from(["0.0", "-2.0"]),
       seed=st.integers(0, 3))
def test_random_kernels_of_the_supported_subset(expression, programs, modulus, threshold, early, loop_end, other, seed):
    source = _SOURCE.format(modulus=modulus, other=other, programs=programs, threshold=threshold, early=early,
                            loop_end=loop_end, expression=expression)
    path = _MODULES / f"k{abs(hash(source))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(programs * 16, generator=g) * 3, torch.randn(programs * 16, generator=g) * 3
    out = torch.full((programs * 16,), -7.0)
    runs = differential(lambda x, y, out: module.kernel[(programs,)](x, y, out, 16, BLOCK=16), x, y, out)
    assert ran_at_once(runs), (source, [r.note() for r in runs])


# ---- scope ---------------------------------------------------------------------------------------------------
def test_a_triton_without_the_internals_runs_every_grid_sequentially(monkeypatch):
    from triton.runtime import interpreter as triton_interpreter

    monkeypatch.delattr(triton_interpreter, "_convert_float")  # stand-in for a Triton whose internals moved
    x = torch.tensor([1.5, -1.0, 2.0, 3.0])
    out = torch.full((4 * 16,), -9.0)
    runs = differential(lambda x, out: cases.early_return[(4,)](x, out, BLOCK=16), x, out)
    import triton

    assert [r.sequential_reason for r in runs] == [f"Triton {triton.__version__}'s interpreter lacks _convert_float"]


def test_nothing_of_triton_stays_changed_after_the_block():
    import triton.language as tl
    from triton.language.semantic import TritonSemantic
    from triton.runtime import interpreter as triton_interpreter

    def state():
        return {
            "call": triton_interpreter.GridExecutor.__call__,
            "device_call": triton_interpreter.InterpretedFunction.__call__,
            "semantic": {n: TritonSemantic.__dict__.get(n) for n in ("to_tensor", "to_tensor_type", "scalar_constant")},
            "semantic_instance": dict(vars(triton_interpreter.interpreter_semantic)),
            "tensor": {n: tl.tensor.__dict__.get(n) for n in ("__bool__", "__index__", "T")},
            "reduce": (tl.reduce, tl.core.reduce, tl.range, tl.static_range),
        }

    before = state()
    x = torch.tensor([1.5, -1.0, 2.0, 3.0])
    with interpreter.cpu_kernels(), grid_at_once() as runs:
        cases.early_return[(4,)](x, torch.zeros(64), BLOCK=16)
    assert ran_at_once(runs)
    assert state() == before


def test_the_json_says_how_each_grid_of_a_side_ran(capsys):
    # a writer from a file runs in its child; what it reports of its grids lands in the side's provenance
    writer = Path(__file__).resolve().parent.parent / "examples" / "my_kernels.py"
    code, out, _ = run(capsys, "compare", "--candidate", f"file:{writer}:indexer_k_quant_and_cache",
                       "--baseline", "triton", "--json", "-", "--quiet")
    report = json.loads(out)
    assert code == 0
    assert report["candidate_provenance"]["interpreter"] == (
        "_quant_and_cache_kernel: 192 programs run grid-at-once in 1 batch")
    assert report["baseline_provenance"] == {
        "interpreter": "_quant_and_cache: 1 program runs sequentially: a grid of one program runs as it is"}


def test_interpreter_sequential_writes_the_same_bytes_and_says_so(capsys):
    writer = Path(__file__).resolve().parent.parent / "examples" / "my_kernels.py"
    code, out, _ = run(capsys, "compare", "--candidate", f"file:{writer}:indexer_k_quant_and_cache",
                       "--baseline", "triton", "--interpreter", "sequential", "--json", "-", "--quiet")
    report = json.loads(out)
    assert code == 0 and report["identical"] is True
    assert report["candidate_provenance"]["interpreter"] == (
        "a grid: 192 programs run sequentially: --interpreter sequential")


def test_interpreter_takes_grid_or_sequential_only(capsys):
    code, _, err = run(capsys, "compare", "--interpreter", "parallel")
    assert code == 2 and "Invalid value for '--interpreter': 'parallel' is not one of 'grid', 'sequential'" in err
