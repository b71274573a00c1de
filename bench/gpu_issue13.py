"""Issue 13 on a CUDA GPU, in one call: proofs first, then every stage timed (run on the lent H200).

    PYTHONPATH=. python3 bench/gpu_issue13.py OUTDIR [PHASE ...]

1. Triton `reference` kernel == PyTorch reference, byte for byte: 6 shapes x both layouts x fp32/ue8m0,
   e4m3fn, five input distributions (inf/NaN included), padded slots; and 1M tokens; plus the start-up
   proof `reference` runs (`uses_triton`).
2. One-pass diff kernel == torch counts (per block, per region, first mismatch) on 1M-token caches:
   identical, the seed bug (every byte), random sparse flips, one flipped byte in the last block.
3. `hashed` inputs: the CUDA kernel's bytes == the torch ops on CUDA == the torch ops on the CPU.
4. Host transfers of one CUDA diff (counted).
5. bench/stages.py's CUDA column (1M tokens, median of 10, CUDA events) and whole processes.
6. (added after run 4, not run yet) bench/diff_words.py: the diff on 4-byte words, equal to and timed
   against the byte kernel.
Everything goes to OUTDIR/gpu_issue13.json; a short table is printed last.
"""

from __future__ import annotations

import collections
import itertools
import json
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fp8check import inputs  # noqa: E402
from fp8check.cache import CacheBuffer  # noqa: E402
from fp8check.diff import count_true, diff_caches  # noqa: E402
from fp8check.spec import CacheSpec, Layout, ScaleFormat  # noqa: E402
from fp8check.writers import registry  # noqa: E402
from fp8check.writers.reference import aiter_writer  # noqa: E402

CUDA = torch.device("cuda")
OUT = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
results: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
summary: list[tuple[str, str]] = []


def note(key: str, value) -> None:
    results[key] = value
    summary.append((key, str(value)))
    print(f"{key}: {value}", flush=True)


def phase(fn):
    start = time.perf_counter()
    try:
        fn()
    except Exception:
        note(f"{fn.__name__} FAILED", traceback.format_exc(limit=3).strip().splitlines()[-1])
        traceback.print_exc()
    results[f"seconds/{fn.__name__}"] = round(time.perf_counter() - start, 1)


def pair(spec: CacheSpec, data) -> tuple[CacheBuffer, CacheBuffer]:
    from fp8check.writers.reference_triton import launch

    expected, got = CacheBuffer.allocate(spec, CUDA), CacheBuffer.allocate(spec, CUDA)
    aiter_writer(data.k, expected.cache, data.slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg,
                 fp8_dtype=spec.fp8.torch_dtype(), layout=spec.layout.value)
    launch(spec, data.k, got.cache, data.slot_mapping)
    return expected, got


def reference_kernel_bytes():
    from fp8check.writers.reference_device import uses_triton

    D = inputs.Distribution
    shapes = [(64, 128, 128), (16, 128, 64), (32, 64, 32), (1, 96, 32), (16, 48, 48), (256, 128, 128)]
    runs, differing, compared, not_proven = 0, 0, 0, []
    for (bs, hd, qbs), scale_fmt, layout in itertools.product(shapes, ScaleFormat, Layout):
        if layout is Layout.SHUFFLE and bs % 16:
            continue
        spec = CacheSpec(num_blocks=max(2, 4096 // bs), block_size=bs, head_dim=hd, quant_block_size=qbs,
                         scale_fmt=scale_fmt, layout=layout)
        if not uses_triton(spec, CUDA):
            not_proven.append(spec.summary())
        for dist in (D.NORMAL, D.MIXED, D.UE8M0_BOUNDARY, D.TIES, D.TINY):
            data = inputs.generate(spec, seed=runs, slots=inputs.SlotPattern.PADDED, distribution=dist,
                                   inf_nan=True, device=CUDA)
            expected, got = pair(spec, data)
            differing += int((expected.buffer != got.buffer).sum())
            compared += expected.buffer.numel()
            runs += 1
    note("1. triton reference vs PyTorch reference: runs / differing bytes / bytes compared",
         f"{runs} / {differing} / {compared}")
    note("1. specs whose start-up proof failed (should be none)", not_proven)
    spec = CacheSpec(num_blocks=16384, block_size=64, head_dim=128)
    for dist in (D.NORMAL, D.HASHED):
        data = inputs.generate(spec, seed=1, distribution=dist, device=CUDA)
        expected, got = pair(spec, data)
        note(f"1. 1M tokens ({dist.value}), ue8m0: differing bytes", int((expected.buffer != got.buffer).sum()))
    spec32 = spec.replace(scale_fmt=ScaleFormat.FP32)
    data = inputs.generate(spec32, seed=2, device=CUDA)
    expected, got = pair(spec32, data)
    note("1. 1M tokens, fp32 scales: differing bytes", int((expected.buffer != got.buffer).sum()))
    cpu = CacheBuffer.allocate(spec32, "cpu")
    data_cpu = data.to("cpu")
    aiter_writer(data_cpu.k, cpu.cache, data_cpu.slot_mapping, 128, None)
    note("1. PyTorch reference CUDA vs CPU, 1M tokens fp32: differing bytes", int((expected.buffer.cpu() != cpu.buffer).sum()))


def diff_kernel_counts():
    spec = CacheSpec(num_blocks=16384, block_size=64, head_dim=128)
    data = inputs.generate(spec, seed=3, distribution=inputs.Distribution.HASHED, device=CUDA)
    base = registry.run(registry.resolve("reference"), spec, data, CUDA)
    cases = {"identical": registry.run(registry.resolve("triton"), spec, data, CUDA),
             "seed bug": registry.run(registry.resolve("triton-buggy"), spec, data, CUDA)}
    sparse = CacheBuffer(spec, base.buffer.clone())
    g = torch.Generator(device=CUDA).manual_seed(0)
    where = torch.randint(0, sparse.flat.numel(), (100_000,), device=CUDA, generator=g)
    sparse.flat.view(-1)[where] ^= 0x21
    cases["100k random flips"] = sparse
    last = CacheBuffer(spec, base.buffer.clone())
    last.flat[-1, -1] ^= 1
    cases["last byte"] = last
    mismatches = []
    for name, other in cases.items():
        d = diff_caches(spec, base, other)
        differs = base.flat != other.flat
        value = count_true(differs[:, : spec.value_bytes])
        scale = count_true(differs[:, spec.value_bytes:])
        ok = torch.equal(d.value_diff, value) and torch.equal(d.scale_diff, scale)
        flat = differs.view(-1).nonzero()
        first = int(flat[0]) if flat.numel() else None
        got = None if d.first_mismatch is None else d.first_mismatch.coordinate.block * spec.block_bytes + \
            d.first_mismatch.coordinate.byte_in_block
        ok = ok and got == first and d.cache_diff == int(differs.sum())
        if not ok:
            mismatches.append(name)
        note(f"2. diff kernel vs torch, {name}: bytes {d.cache_diff}, blocks {d.differing_blocks}", "equal" if ok else "DIFFERENT")
    note("2. diff kernel cases that disagree with torch (should be none)", mismatches)


def hashed_inputs():
    from fp8check.hashed import hashed_k

    spec = CacheSpec(num_blocks=16384, block_size=64, head_dim=128)
    kernel = inputs.generate(spec, seed=9, distribution=inputs.Distribution.HASHED, device=CUDA).k
    ops = hashed_k(spec.num_slots, 128, 9, CUDA)
    note("3. hashed K, 1M tokens: kernel == torch ops on CUDA", torch.equal(kernel.view(torch.int16), ops.view(torch.int16)))
    cpu = hashed_k(65536, 128, 9, "cpu")
    note("3. hashed K, first 65,536 tokens: CUDA == CPU", torch.equal(kernel[:65536].cpu().view(torch.int16), cpu.view(torch.int16)))


def host_transfers():
    spec = CacheSpec(num_blocks=1024, block_size=64, head_dim=128)
    data = inputs.generate(spec, seed=4, device=CUDA)
    base = registry.run(registry.resolve("reference"), spec, data, CUDA)
    bug = registry.run(registry.resolve("triton-buggy"), spec, data, CUDA)
    same = registry.run(registry.resolve("triton"), spec, data, CUDA)
    counts = {}
    for name, other in (("identical", same), ("seed bug", bug)):
        counter: collections.Counter = collections.Counter()
        saved = {}
        for method in ("item", "tolist", "__int__", "__float__", "__bool__", "__index__", "cpu", "numpy"):
            saved[method] = getattr(torch.Tensor, method)

            def counted(self, *a, _m=method, **k):
                counter[_m] += 1
                return saved[_m](self, *a, **k)

            setattr(torch.Tensor, method, counted)
        try:
            diff_caches(spec, base, other)
        finally:
            for method, fn in saved.items():
                setattr(torch.Tensor, method, fn)
        counts[name] = dict(counter)
    note("4. host transfers of one CUDA diff", counts)


def stages():
    import stages as bench

    columns = {"cuda": bench.in_process("cuda", 16384, 10)}
    columns["cuda"].update(bench.whole_process("cuda", 16384, 3))
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__}
    import triton

    meta["triton"] = triton.__version__
    sizes = {"cuda": f"{16384 * 64:,} tokens, H200"}
    (OUT / "stages_cuda.json").write_text(json.dumps({"meta": meta, "sizes": sizes, "columns": columns}, indent=1))
    print(bench.table(columns, sizes))
    for line in bench.verdicts(columns):
        summary.append(("5.", line))


def word_diff_experiment():
    import diff_words

    diff_words.main()  # prints: the word kernel == the byte kernel, and both timed against torch.equal


ONLY = sys.argv[2:]  # phase names to run (default: all)
for step in (reference_kernel_bytes, diff_kernel_counts, hashed_inputs, host_transfers, stages, word_diff_experiment):
    if not ONLY or step.__name__ in ONLY:
        phase(step)
(OUT / "gpu_issue13.json").write_text(json.dumps(results, indent=1, default=str))
print("\n=== summary ===")
for key, value in summary:
    print(f"{key}  {value}")
