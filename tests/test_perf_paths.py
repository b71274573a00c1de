"""The fast paths compute the same answers as the plain ones: the one-pass diff kernel (run here under
Triton's interpreter), the Triton `reference` writer (byte for byte against the PyTorch emulation), and
the diff's host transfers (one per diff, plus `torch.equal` on the CPU)."""

from __future__ import annotations

import collections
import itertools

import pytest
import torch

from fp8check.core import inputs
from fp8check.core.cache import CacheBuffer
from fp8check.core.diff import diff_caches
from fp8check.core.spec import CacheSpec, FP8Format, Layout, ScaleFormat
from fp8check.producers import registry
from fp8check.triton_cpu.known_answers import check as interpreter_check
from fp8check.triton_cpu.interpreter import cpu_kernels
from fp8check.core.reference import aiter_writer

CPU = torch.device("cpu")


def random_pair(num_blocks: int, block_bytes: int, flips: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 256, (num_blocks, block_bytes), dtype=torch.uint8, generator=g)
    b = a.clone()
    where = torch.randint(0, a.numel(), (flips,), generator=g)
    b.view(-1)[where] ^= torch.randint(1, 256, (flips,), dtype=torch.uint8, generator=g)
    return a, b


@pytest.mark.parametrize("num_blocks, block_bytes, value_bytes, flips", [
    (7, 2304, 2048, 500), (5, 8448, 8192, 3), (4, 132, 128, 40), (3, 2304, 2048, 0),
])
def test_diff_kernel_counts_equal_torch_counts(num_blocks, block_bytes, value_bytes, flips):
    from fp8check.core.diff_kernel import block_diff

    a, b = random_pair(num_blocks, block_bytes, flips, seed=num_blocks + flips)
    b[1] = a[1]  # one equal block
    with cpu_kernels():  # the CUDA diff kernels, under fp8check's interpreter scope on CPU tensors
        value, scale, first = block_diff(a, b, value_bytes, block_bytes - value_bytes)
    differs = a != b
    assert value.tolist() == differs[:, :value_bytes].sum(dim=1).tolist()
    assert scale.tolist() == differs[:, value_bytes:].sum(dim=1).tolist()
    assert first.tolist() == [int(row.nonzero()[0]) if row.any() else block_bytes for row in differs]


def count_transfers(monkeypatch) -> collections.Counter:
    """Count every way a tensor's value reaches Python (and torch.equal, whose answer does)."""
    counter: collections.Counter = collections.Counter()
    for name in ("item", "tolist", "__int__", "__float__", "__bool__", "__index__", "cpu", "numpy"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            counter[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    equal = torch.equal

    def counted_equal(a, b):
        counter["torch.equal"] += 1
        return equal(a, b)

    monkeypatch.setattr(torch, "equal", counted_equal)
    return counter


SPEC = CacheSpec(num_blocks=6, block_size=32, head_dim=64, quant_block_size=32)


@pytest.fixture(scope="module")
def written() -> CacheBuffer:
    return registry.run(registry.resolve("reference"), SPEC, inputs.generate(SPEC, seed=3), CPU)


def test_identical_diff_is_one_torch_equal(written, monkeypatch):
    other = CacheBuffer(SPEC, written.buffer.clone())
    counter = count_transfers(monkeypatch)
    result = diff_caches(SPEC, written, other)
    assert dict(counter) == {"torch.equal": 1}
    assert result.identical and result.first_mismatch is None and result.differing_blocks == 0
    assert result.value_diff.tolist() == [0] * 6 and result.scale_diff.tolist() == [0] * 6


def test_differing_diff_is_one_transfer_after_torch_equal(written, monkeypatch):
    other = CacheBuffer(SPEC, written.buffer.clone())
    other.flat[2, 2050] ^= 0x10  # a scale byte of block 2
    other.flat[4, :100] ^= 0xFF
    counter = count_transfers(monkeypatch)
    result = diff_caches(SPEC, written, other)
    assert dict(counter) == {"torch.equal": 1, "tolist": 1}
    monkeypatch.undo()
    assert result.cache_diff == 101 and result.differing_blocks == 2
    assert result.value_diff.tolist() == [0, 0, 0, 0, 100, 0] and result.scale_diff.tolist() == [0, 0, 1, 0, 0, 0]
    m = result.first_mismatch
    assert (m.coordinate.block, m.coordinate.byte_in_block) == (2, 2050)
    word = written.flat[2, 2048:2052].contiguous().view(torch.float32).item()
    assert m.baseline_value == word and m.baseline_byte == int(written.flat[2, 2050])


# (block_size, head_dim, qbs): DeepSeek's shape, several groups per token, block 1 (linear only), a
# quant group that is not a power of two (masked lanes)
SHAPES = [(64, 128, 128), (16, 128, 64), (32, 64, 32), (1, 96, 32), (16, 48, 48)]
CASES = [
    (shape, fmt, scale_fmt, layout)
    # the Triton kernel's layouts and scale formats (the PyTorch writer alone writes interleaved and ue8m0x4)
    for shape, fmt, scale_fmt, layout in itertools.product(SHAPES, FP8Format, (ScaleFormat.UE8M0, ScaleFormat.FP32),
                                                           (Layout.SHUFFLE, Layout.LINEAR))
    if not (layout is Layout.SHUFFLE and shape[0] % 16)
]


@pytest.mark.parametrize("shape, fmt, scale_fmt, layout", CASES,
                         ids=[f"{s[0]}x{s[1]}q{s[2]}-{f.value}-{sf.value}-{lay.value}" for s, f, sf, lay in CASES])
def test_triton_reference_bytes_equal_pytorch_reference(shape, fmt, scale_fmt, layout):
    ok, reason = interpreter_check(fmt)
    if not ok:
        pytest.skip(reason)
    from fp8check.producers.triton import launch_reference as launch

    block_size, head_dim, qbs = shape
    spec = CacheSpec(num_blocks=3, block_size=block_size, head_dim=head_dim, quant_block_size=qbs, fp8=fmt,
                     scale_fmt=scale_fmt, layout=layout)
    data = inputs.generate(spec, seed=5, slots=inputs.SlotPattern.PADDED, distribution=inputs.Distribution.MIXED,
                           inf_nan=True)
    expected, got = CacheBuffer.allocate(spec, CPU), CacheBuffer.allocate(spec, CPU)
    aiter_writer(data.k, expected.cache, data.slot_mapping, qbs, scale_fmt.writer_arg, fp8_dtype=fmt.torch_dtype(),
                 layout=layout.value)
    launch(spec, data.k, got.cache, data.slot_mapping)
    assert torch.equal(got.buffer, expected.buffer)
    assert not torch.equal(got.buffer, CacheBuffer.allocate(spec, CPU).buffer)  # it wrote something


def test_known_answer_proof_catches_a_wrong_kernel(monkeypatch):
    """The start-up proof compares against the PyTorch bytes: a kernel that rounds differently fails it."""
    if not interpreter_check(FP8Format.E4M3FN)[0]:
        pytest.skip("no exact interpreter")
    from fp8check.producers import reference_device, triton as triton_writers

    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=64, quant_block_size=64)
    assert reference_device.known_answer(spec, CPU)[0] == 0
    original = triton_writers.launch_reference

    def wrong(spec, k, kv_cache, slot_mapping):
        original(spec, k, kv_cache, slot_mapping)
        kv_cache.view(-1)[5] ^= 1

    monkeypatch.setattr(triton_writers, "launch_reference", wrong)
    assert reference_device.known_answer(spec, CPU)[0] == 1


def test_reference_writes_with_pytorch_on_the_cpu():
    from fp8check.producers import reference_device

    assert not reference_device.uses_triton(SPEC, CPU)


def python_mix(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x27D4EB2D) & 0xFFFFFFFF
    return x ^ (x >> 16)


def python_hashed_bits(seed: int, token: int, dim: int, head_dim: int) -> int:
    """One element of hashed K as bf16 bits, in plain Python integers and doubles (inputs.hashed_k's recipe)."""
    import struct

    base = python_mix(seed & 0xFFFFFFFF)
    element_key, row_key = python_mix(base ^ 0x9E3779B9), python_mix(base ^ 0x85EBCA6B)
    i = token * head_dim + dim
    h1, h2 = python_mix((2 * i) ^ element_key), python_mix((2 * i + 1) ^ element_key)
    u = (h1 & 0xFFFF) + (h1 >> 16) + (h2 & 0xFFFF) + (h2 >> 16) - 131070
    r = python_mix(token ^ row_key)
    value = u * 2.0**-15 * 2.0 ** (r % 7 - 3) * (8 + (r >> 3) % 8) / 8  # exact in a double
    bits = struct.unpack("<I", struct.pack("<f", value))[0]  # exact in fp32 too (<= 22 significant bits)
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # bf16, nearest even


@pytest.mark.parametrize("seed", [0, 7, -5, 2**40 + 3])
def test_hashed_inputs_are_the_documented_function_of_seed_and_position(seed):
    spec = CacheSpec(num_blocks=1, block_size=16, head_dim=48, quant_block_size=48)
    k = inputs.generate(spec, seed=seed, distribution=inputs.Distribution.HASHED).k
    got = k.view(torch.int16).to(torch.int64) & 0xFFFF
    expected = [[python_hashed_bits(seed, t, d, 48) for d in range(48)] for t in range(16)]
    assert got.tolist() == expected


@pytest.mark.parametrize("num_tokens, head_dim", [(300, 128), (7, 48), (1, 16)])
def test_hashed_kernel_bytes_equal_the_torch_ops(num_tokens, head_dim):
    from fp8check.core.inputs import hashed_k, keys
    from fp8check.core.hashed_kernel import launch

    expected = hashed_k(num_tokens, head_dim, 11)
    got = launch(num_tokens, head_dim, keys(11), CPU, interpret=True)
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))


def synthetic_diff(value_diff: list[int]):
    from fp8check.core.diff import DiffResult

    spec = CacheSpec(num_blocks=len(value_diff), block_size=16, head_dim=64, quant_block_size=64)
    values = torch.tensor(value_diff, dtype=torch.int64)
    differing = sum(1 for v in value_diff if v)
    return DiffResult(spec, values, torch.zeros_like(values), 0, sum(value_diff), differing, None)


def test_terminal_shows_the_first_and_the_worst_differing_blocks():
    from fp8check.report.terminal import MAX_ROWS, rows_to_show

    counts = [0] * 1000
    for block in (3, 10, 11, 50, 51, 52, 60, 70, 80, 90):  # the first differing blocks, one byte each
        counts[block] = 1
    for rank, block in enumerate((999, 500, 400, 300, 200, 150, 120, 110, 105)):  # the worst, 900 bytes down
        counts[block] = 900 - rank
    shown = [b.block for b in rows_to_show(synthetic_diff(counts), all_blocks=False)]
    first = [b for b, c in enumerate(counts) if c][: MAX_ROWS // 2]
    worst = sorted(range(1000), key=lambda b: -counts[b])[: MAX_ROWS // 2]
    assert shown == sorted(set(first) | set(worst))
    assert 999 in shown and 105 not in shown  # the ninth worst is not among the eight worst


def test_all_blocks_renders_one_line_per_block():
    import io

    from rich.console import Console

    from fp8check.report.terminal import block_lines, rows_to_show

    counts = [i % 3 for i in range(500)]
    rows = rows_to_show(synthetic_diff(counts), all_blocks=True)
    console = Console(file=io.StringIO(), width=100)
    console.print(block_lines(rows))
    lines = console.file.getvalue().splitlines()
    assert len(lines) == 501
    assert lines[1 + 302].split() == ["302", "2", "/", "1024", "0.2%", "0", "/", "64"]


@pytest.mark.parametrize("num_bytes", [0, 1, 255, 256, 257, 3 * 8448 + 512])
def test_poison_by_period_equals_the_formula(num_bytes):
    from fp8check.core.cache import poison, poison_at

    assert torch.equal(poison(num_bytes), poison_at(torch.arange(num_bytes)))


@pytest.mark.parametrize("flips, guard_flips", [(0, 0), (0, 3), (1, 0), (500, 2)])
def test_cuda_summary_program_equals_the_torch_formulation(written, flips, guard_flips):
    """The one-program summary CUDA diffs end with (totals, guards, first mismatch), run here under the
    interpreter, gives the same DiffResult as the torch ops of the CPU path."""
    from fp8check.core.diff import from_summary
    from fp8check.core.diff_kernel import block_diff, summary

    other = CacheBuffer(SPEC, written.buffer.clone())
    g = torch.Generator().manual_seed(flips + guard_flips)
    where = torch.randint(0, other.flat.numel(), (flips,), generator=g)
    other.flat.view(-1)[where] ^= torch.randint(1, 256, (flips,), dtype=torch.uint8, generator=g)
    guard = written.guard_bytes
    at = torch.randint(0, 2 * guard, (guard_flips,), generator=g)
    at = torch.where(at < guard, at, at + other.flat.numel())
    other.buffer[at] ^= 0x5A
    expected = diff_caches(SPEC, written, other)
    with cpu_kernels():
        value, scale, first = block_diff(written.flat, other.flat, SPEC.value_bytes, SPEC.scale_bytes)
        numbers = summary(value, scale, first, written.buffer, other.buffer, guard, SPEC.block_bytes,
                          SPEC.value_bytes).tolist()
    got = from_summary(SPEC, value, scale, numbers)
    assert (got.cache_diff, got.differing_blocks, got.guard_diff) == \
        (expected.cache_diff, expected.differing_blocks, expected.guard_diff)
    assert got.value_diff.tolist() == expected.value_diff.tolist()
    assert got.scale_diff.tolist() == expected.scale_diff.tolist()
    assert got.first_mismatch == expected.first_mismatch
    assert expected.guard_diff == len(set(at.tolist())) and expected.cache_diff == int((written.flat != other.flat).sum())


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where torch sees no GPU")
def test_device_cuda_without_a_gpu_is_still_one_line_and_exit_2(capsys, monkeypatch):
    """--device cuda on a machine without a GPU is one line and exit 2."""
    from conftest import run

    code, out, err = run(capsys, "compare", "--device", "cuda")
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert "--device cuda: torch sees no CUDA device" in err


def _slot_truth(slots: torch.Tensor, num_slots: int) -> list[int]:
    """check_slots' three numbers, by Python over the list: the independent computation."""
    values = slots.tolist()
    mapped = [s for s in values if s >= 0]
    inside = [s for s in mapped if s < num_slots]
    return [len(mapped), max(mapped, default=0), int(len(set(inside)) < len(inside))]


def _slot_cases() -> dict[str, tuple[torch.Tensor, int]]:
    g = torch.Generator().manual_seed(5)
    n = 3000  # three programs of 1024
    shuffled = torch.randperm(n, generator=g)
    padded = shuffled.clone()
    padded[torch.randperm(n, generator=g)[:700]] = -1
    twice_far = shuffled.clone()
    twice_far[2999] = twice_far[0]  # the same slot from the first and the last program
    negative = padded.clone()
    negative[::7] = -7
    outside = shuffled.clone()
    outside[1500] = n + 40
    both = outside.clone()
    both[10] = n + 40  # one slot outside the cache, twice: outside, not a repeat inside
    return {
        "sequential": (torch.arange(n), n), "shuffled": (shuffled, n), "padded": (padded, n),
        "all padding": (torch.full((n,), -1), n), "repeated across programs": (twice_far, n),
        "other negatives": (negative, n), "outside": (outside, n), "outside twice": (both, n),
        "spare slots": (padded[:1000], 4 * n), "one token": (torch.tensor([5]), 8), "empty": (torch.zeros(0, dtype=torch.int64), 8),
    }


@pytest.mark.parametrize("case", list(_slot_cases()))
def test_slot_numbers_of_the_torch_path_equal_the_plain_ones(case):
    slots, num_slots = _slot_cases()[case]
    got, truth = inputs.slot_numbers(slots, num_slots), _slot_truth(slots, num_slots)
    assert got[0] == truth[0] and got[2] == truth[2] and (got[1] == truth[1] or not truth[0])


def test_identical_caches_skip_the_diagnosis_with_the_same_answer():
    from fp8check.diagnose import diagnose

    spec = CacheSpec(num_blocks=4, block_size=16, head_dim=64, quant_block_size=64)
    data = inputs.generate(spec, seed=1, slots=inputs.SlotPattern.PADDED)
    a = registry.run(registry.resolve("reference"), spec, data, CPU)
    b = registry.run(registry.resolve("reference"), spec, data, CPU)
    diff = diff_caches(spec, a, b)
    assert diff.identical and diagnose(spec, a, b, data, diff=diff) == diagnose(spec, a, b, data) == diagnose(
        spec, a, b, data, diff=None)
    assert diagnose(spec, a, b, data).causes == ()
    b.buffer[0] ^= 1  # a guard byte differs: not identical, the full diagnosis runs
    diff = diff_caches(spec, a, b)
    assert not diff.identical and diagnose(spec, a, b, data, diff=diff).bytes == 1
