"""Compiled-Triton verification and timing on a CUDA GPU (run on the lent H200; see docs/GPU.md).

Straight-line phases, one printed table at the end and a JSON file (argv[1], default gpu_verify.json):
  1. known-answer check of the CPU interpreter's exact FP8 conversion on this machine's Triton;
  2. fixed Triton writer == reference byte for byte, e4m3fn + ue8m0, blocks 16/64/256, 1024+ blocks, 3 seeds,
     sequential, shuffled and padded slots;
  3. the CPU interpreter's bytes == the compiled bytes (same inputs), fixed wrapper;
  4. what differs without ue8m0 (fp32 scales) and on amax = 448 * 2^k rows (approximate division);
  5. the seed table on the GPU (buggy vs fixed);
  6. fnuz refusal message;
  7. timing: Triton writer on 1M tokens, device copy bandwidth, diff of two 1M-token caches.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import triton

from fp8check.errors import ProducerError
from fp8check.writers import reference
from fp8check.writers import registry as producers
from fp8check.compare import compare, run_side
from fp8check.diff import diff_caches
from fp8check.inputs import Inputs, SlotPattern, generate
from fp8check.spec import CacheSpec, ScaleFormat
from fp8check.writers.interpreter import check as interpreter_check

cuda = torch.device("cuda")
out: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
rows: list[tuple[str, str]] = []


def note(key: str, value) -> None:
    out[key] = value
    rows.append((key, str(value)))


# 1. the interpreter's exact conversion, on this Triton
note("interpreter_known_answer", interpreter_check())

# 2. compiled fixed writer vs reference, ue8m0 + e4m3fn
ref, fixed, buggy = producers.resolve("reference"), producers.resolve("triton"), producers.resolve("triton-buggy")
for block_size in (16, 64, 256):
    for seed in (0, 1, 2):
        for slots in (SlotPattern.SEQUENTIAL, SlotPattern.SHUFFLED, SlotPattern.PADDED):
            spec = CacheSpec(num_blocks=1024, block_size=block_size, head_dim=128)
            data = generate(spec, seed=seed, slots=slots)
            r = compare(spec, baseline=ref, candidate=fixed, inputs=data, device=cuda)
            out[f"fixed_vs_reference/bs{block_size}/seed{seed}/{slots.value}"] = r.diff.diff_bytes
    note(f"fixed vs reference, block {block_size}, 1024 blocks, 3 seeds x 3 slot patterns: differing bytes",
         sum(v for k, v in out.items() if k.startswith(f"fixed_vs_reference/bs{block_size}/")))

# 3. interpreter bytes == compiled bytes
spec = CacheSpec(num_blocks=16, block_size=64, head_dim=128)
data = generate(spec, seed=7, slots=SlotPattern.PADDED)
try:
    gpu_side = run_side(fixed, spec, data.to(cuda), cuda)
    cpu_side = run_side(fixed, spec, data, torch.device("cpu"))
    note("interpreter vs compiled, fixed, 16 blocks: differing bytes",
         int((gpu_side.buffer.buffer.cpu() != cpu_side.buffer.buffer).sum()))
    gpu_bug = run_side(buggy, spec, data.to(cuda), cuda)
    cpu_bug = run_side(buggy, spec, data, torch.device("cpu"))
    note("interpreter vs compiled, buggy (platform-defined float->uint8): differing bytes",
         int((gpu_bug.buffer.buffer.cpu() != cpu_bug.buffer.buffer).sum()))
except ProducerError as exc:
    note("interpreter vs compiled", f"CPU run refused: {exc}")

# 4. fp32 scales: reciprocal (aiter) vs Triton's compiled division; and vs IEEE division (reference-vllm)
spec32 = CacheSpec(num_blocks=1024, block_size=64, head_dim=128, scale_fmt=ScaleFormat.FP32)
data32 = generate(spec32, seed=0)
for base in ("reference", "reference-vllm"):
    r = compare(spec32, baseline=producers.resolve(base), candidate=fixed, inputs=data32, device=cuda)
    d = r.diff
    note(f"fp32 scales, {base} vs triton: value / scale bytes differing of {d.total_bytes}",
         f"{int(d.value_diff.sum())} / {int(d.scale_diff.sum())}")
# rows with amax exactly 448 * 2^k: the ue8m0 ceil is exact only with exact division
g = torch.Generator().manual_seed(3)
tokens = 64 * 64
k = torch.randn(tokens, 128, generator=g) * 0.5
power = torch.randint(-12, 4, (tokens,), generator=g).float()
k = (k.clamp(-0.99, 0.99) * 448 * torch.exp2(power)[:, None])
k[:, 0] = 448 * torch.exp2(power)  # the row's amax sits on DIV * 2^k
boundary = Inputs(k.to(torch.bfloat16), torch.arange(tokens), "amax = 448 * 2^k rows")
spec_b = CacheSpec(num_blocks=64, block_size=64, head_dim=128)
r = compare(spec_b, baseline=ref, candidate=fixed, inputs=boundary, device=cuda)
note("ue8m0, amax = 448*2^k rows, reference vs compiled triton: differing bytes (of 540672)", r.diff.diff_bytes)
note("  first mismatch", r.diff.first_mismatch.describe() if r.diff.first_mismatch else None)
try:
    r = compare(spec_b, baseline=ref, candidate=fixed, inputs=boundary, device=torch.device("cpu"))
    note("ue8m0, amax = 448*2^k rows, reference vs interpreted triton: differing bytes", r.diff.diff_bytes)
except ProducerError as exc:
    note("interpreted boundary rows", f"CPU run refused: {exc}")

# 5. the seed table on the GPU
spec = CacheSpec(num_blocks=8, block_size=64, head_dim=128)
data = generate(spec, seed=0)
b = compare(spec, baseline=ref, candidate=buggy, inputs=data, device=cuda).diff.all_rows()
f = compare(spec, baseline=ref, candidate=fixed, inputs=data, device=cuda).diff.all_rows()
note("seed table on GPU, buggy value bytes differing per block (of 8192)", [x.value_diff for x in b])
note("seed table on GPU, fixed value bytes differing per block", [x.value_diff for x in f])

# 6. fnuz is refused on NVIDIA
try:
    run_side(fixed, CacheSpec(num_blocks=2, block_size=64, head_dim=128, fp8=__import__('fp8check.spec', fromlist=['FP8Format']).FP8Format.E4M3FNUZ),
             data.to(cuda), cuda)
    note("fnuz on NVIDIA", "ran (unexpected)")
except ProducerError as exc:
    note("fnuz on NVIDIA", str(exc))

# 7. timing
def cuda_time(fn, reps=20) -> float:
    fn()  # warm-up (compiles)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return times[len(times) // 2]

from fp8check.cache import CacheBuffer  # noqa: E402
from fp8check.writers.triton import TOKENS_PER_PROGRAM, launch  # noqa: E402

tokens = 1 << 20
spec = CacheSpec(num_blocks=tokens // 64, block_size=64, head_dim=128)
k = torch.randn(tokens, 128, device=cuda, dtype=torch.bfloat16)
slots = torch.arange(tokens, device=cuda)
buf = CacheBuffer.allocate(spec, cuda)
moved = tokens * (256 + 8 + 132)
for tile in (1, 2, 4, 8, 16, 32, 64):
    TOKENS_PER_PROGRAM["cuda"] = tile
    us = cuda_time(lambda: launch(k, buf.cache, slots, 128, "ue8m0"))
    out[f"triton_1M_us/tokens_per_program={tile}"] = us
    rows.append((f"triton writer, 1M tokens, {tile} tokens/program: us (TB/s)", f"{us:.1f} ({moved / us / 1e6:.2f})"))
TOKENS_PER_PROGRAM["cuda"] = 16
src = torch.empty(1 << 30, dtype=torch.uint8, device=cuda)
dst = torch.empty_like(src)
us = cuda_time(lambda: dst.copy_(src))
note("device copy 1 GiB: TB/s (read + write)", round(2 * src.numel() / us / 1e6, 2))
del src, dst
ref_buf = CacheBuffer.allocate(spec, cuda)
us = cuda_time(lambda: reference.aiter_writer(k, ref_buf.cache, slots, 128, "ue8m0"), reps=5)
note("reference (PyTorch) writer, 1M tokens: us", round(us, 1))
t0 = time.perf_counter()
d = diff_caches(spec, ref_buf, buf)
torch.cuda.synchronize()
note("diff of two 1M-token caches (incl. host summary): ms", round((time.perf_counter() - t0) * 1e3, 2))
us = cuda_time(lambda: diff_caches(spec, ref_buf, buf), reps=5)
note("diff, steady state: us", round(us, 1))
note("1M tokens, reference vs triton: differing bytes", d.diff_bytes)

path = sys.argv[1] if len(sys.argv) > 1 else "gpu_verify.json"
with open(path, "w") as fh:
    json.dump(out, fh, indent=2)
width = max(len(k) for k, _ in rows)
for key, value in rows:
    print(f"{key:<{width}}  {value}")
