"""Experiment for the next GPU run: the one-pass block diff on 4-byte words instead of bytes.

fp8check/diff_kernel.py spends several integer operations per byte (measured on the H200: 0.74 ms for
two identical 1M-token caches, 3.5x torch.equal). Here each lane handles a 32-bit word: the XOR of the
two words, then per-byte "differs" flags with SWAR masks ((t & 0x7F..) + 0x7F.. | t) & 0x80.., their
count by one multiply, and the first differing byte of the word by three compares. Same outputs as
diff_kernel.block_diff. Not used by fp8check: `python bench/diff_words.py` proves it equal to the byte
kernel (under the interpreter on the CPU, compiled on a GPU) and, on a GPU, times both on 1M tokens.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORDS = 1024


def _block_diff_words(a_ptr, b_ptr, value_out, scale_out, first_out, block_words, value_words, scale_end_words,
                      block_bytes, WORDS: tl.constexpr):
    block = tl.program_id(0)
    base = block.to(tl.int64) * block_words
    value = tl.full([WORDS], 0, tl.int32)
    scale = tl.full([WORDS], 0, tl.int32)
    first = tl.full([WORDS], 2147483647, tl.int32)
    for start in range(0, block_words, WORDS):
        word = start + tl.arange(0, WORDS)
        inside = word < block_words
        x = tl.load(a_ptr + base + word, mask=inside, other=0) ^ tl.load(b_ptr + base + word, mask=inside, other=0)
        t = x.to(tl.uint32, bitcast=True)  # unsigned: the multiply below wraps by definition
        low7 = tl.full([WORDS], 0x7F7F7F7F, tl.uint32)
        flags = ((((t & low7) + low7) | t) >> 7) & tl.full([WORDS], 0x01010101, tl.uint32)  # 1 per differing byte
        count = ((flags * tl.full([WORDS], 0x01010101, tl.uint32)) >> 24).to(tl.int32)  # 0..4 in the top byte
        value += tl.where(word < value_words, count, 0)
        scale += tl.where((word >= value_words) & (word < scale_end_words), count, 0)
        lowest = tl.where((t & 0xFF) != 0, 0, tl.where((t & 0xFF00) != 0, 1, tl.where((t & 0xFF0000) != 0, 2, 3)))
        first = tl.minimum(first, tl.where(t != 0, word * 4 + lowest, 2147483647))
    tl.store(value_out + block, tl.reduce(value, 0, tl.standard._sum_combine).to(tl.int64))
    tl.store(scale_out + block, tl.reduce(scale, 0, tl.standard._sum_combine).to(tl.int64))
    first_offset = tl.reduce(first, 0, tl.standard._elementwise_min)
    tl.store(first_out + block, tl.minimum(first_offset, block_bytes).to(tl.int64))


_compiled = triton.jit(_block_diff_words)


def block_diff_words(a: torch.Tensor, b: torch.Tensor, value_bytes: int, scale_bytes: int):
    num_blocks, block_bytes = a.shape
    assert block_bytes % 4 == 0 and value_bytes % 4 == 0 and scale_bytes % 4 == 0
    value = torch.empty(num_blocks, dtype=torch.int64, device=a.device)
    scale, first = torch.empty_like(value), torch.empty_like(value)
    if a.device.type == "cpu":
        from triton.runtime.interpreter import InterpretedFunction

        kernel = InterpretedFunction(_block_diff_words)
    else:
        kernel = _compiled
    kernel[(num_blocks,)](a.view(torch.int32), b.view(torch.int32), value, scale, first, block_bytes // 4,
                          value_bytes // 4, (value_bytes + scale_bytes) // 4, block_bytes, WORDS=WORDS, num_warps=4)
    return value, scale, first


def main() -> None:
    from fp8check.diff_kernel import block_diff

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    num_blocks = 16384 if device.type == "cuda" else 6
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randint(0, 256, (num_blocks, 8448), dtype=torch.uint8, device=device, generator=g)
    cases = {"identical": a.clone()}
    sparse = a.clone()
    where = torch.randint(0, a.numel(), (max(10, a.numel() // 1000),), device=device, generator=g)
    sparse.view(-1)[where] ^= torch.randint(1, 256, where.shape, dtype=torch.uint8, device=device, generator=g)
    cases["sparse flips"] = sparse
    cases["every byte"] = a ^ 0x5A
    last = a.clone()
    last[-1, -1] ^= 1
    cases["last byte"] = last
    for name, b in cases.items():
        got = block_diff_words(a, b, 8192, 256)
        expected = block_diff(a, b, 8192, 256)
        equal = all(torch.equal(x, y) for x, y in zip(got, expected))
        line = f"{name}: words == bytes kernel: {equal}"
        if device.type == "cuda":
            times = {}
            for label, fn in (("words", block_diff_words), ("bytes", block_diff)):
                fn(a, b, 8192, 256)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                samples = []
                for _ in range(10):
                    start.record()
                    fn(a, b, 8192, 256)
                    end.record()
                    torch.cuda.synchronize()
                    samples.append(start.elapsed_time(end))
                times[label] = sorted(samples)[5]
            equal_ms = min(_time_equal(a, b) for _ in range(3))
            line += f"; words {times['words']:.3f} ms, bytes {times['bytes']:.3f} ms, torch.equal {equal_ms:.3f} ms"
        print(line, flush=True)


def _time_equal(a, b) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    torch.equal(a, b)
    return (time.perf_counter() - start) * 1e3


if __name__ == "__main__":
    main()
