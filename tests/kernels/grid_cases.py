"""Small Triton kernels that exercise what a grid-at-once run must get right (tests/test_grid_interpreter.py):
early returns, loops whose bounds differ between programs, data-dependent while loops, reductions over
every axis, dot products (fp32 and fp8), FP8 conversion in both formats, masks, 2-D grids; and kernels it
must hand to the sequential interpreter (atomics, programs that read what others write, two programs
storing one byte)."""

import triton
import triton.language as tl


@triton.jit
def early_return(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    if v < 0:
        return
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + pid * BLOCK + offs, v * offs.to(tl.float32) + 0.5)


@triton.jit
def ragged_loop(len_ptr, x_ptr, out_ptr, STEP: tl.constexpr, BLOCK: tl.constexpr):
    """Each program sums rows pid, pid + STEP, ... below its own length: start and end differ per program."""
    pid = tl.program_id(0)
    n = tl.load(len_ptr + pid)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.range(pid % 3, n, STEP):
        row = i // 2 * 2 + i % 2  # Python int arithmetic on the loop variable
        acc = acc * 0.75 + tl.load(x_ptr + row * BLOCK + offs, mask=offs < row + 3, other=-1.0)
    tl.store(out_ptr + pid * BLOCK + offs, acc)


@triton.jit
def halving_while(x_ptr, out_ptr, count_ptr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    count = 0
    while x > 1.0:
        x = x / 3.0
        count += 1
    tl.store(out_ptr + pid, x)
    tl.store(count_ptr + pid, count)


@triton.jit
def reductions(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    pid = tl.program_id(0)
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + pid * M * N + rows[:, None] * N + cols[None, :])
    base = out_ptr + pid * (2 * M + 2 * N + 6)
    tl.store(base + cols, tl.sum(x, axis=0))
    tl.store(base + N + rows, tl.sum(x * 1.5 - 0.25, axis=1))
    tl.store(base + N + M + cols, tl.max(x, axis=0))
    tl.store(base + 2 * N + M + rows, tl.min(tl.trans(x), axis=0))
    tl.store(base + 2 * N + 2 * M, tl.sum(x))
    tl.store(base + 2 * N + 2 * M + 1, tl.max(tl.abs(x)))
    tl.store(base + 2 * N + 2 * M + 2, tl.argmax(tl.sum(x, axis=1), axis=0).to(tl.float32))
    tl.store(base + 2 * N + 2 * M + 3, tl.sum(tl.reshape(x, (M * N,))))
    total = tl.sum(tl.sum(x, axis=1, keep_dims=True), axis=0)
    tl.store(base + 2 * N + 2 * M + 4 + tl.arange(0, 1), total)
    tl.store(base + 2 * N + 2 * M + 5, tl.sum(tl.where(x > 0, x, 0.0)))


@triton.jit
def reductions_over_layouts(x_ptr, u_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    """Sums over transposed, broadcast and mixed (per-program with the-same-in-every-program) blocks."""
    pid = tl.program_id(0)
    r = tl.arange(0, M)
    c = tl.arange(0, N)
    x = tl.load(x_ptr + pid * M * N + r[:, None] * N + c[None, :])
    u = tl.load(u_ptr + r[:, None] * N + c[None, :])  # the same in every program
    ut = tl.trans(u)
    xt = tl.trans(x)
    o = out_ptr + pid * 16 * 128
    tl.store(o + tl.arange(0, N), tl.sum(xt * 1.5, axis=1))
    tl.store(o + 128 + tl.arange(0, N), tl.sum(ut * x.T, axis=1))
    tl.store(o + 256 + tl.arange(0, M), tl.sum(ut * xt, axis=0))
    tl.store(o + 384 + tl.arange(0, N), tl.sum(u * x, axis=0))
    tl.store(o + 512 + tl.arange(0, M), tl.sum(u + x * 0.5, axis=1))
    tl.store(o + 640, tl.sum(xt * ut))
    tl.store(o + 641, tl.sum(ut))
    b = tl.broadcast_to(tl.sum(x, axis=0)[None, :], (M, N))
    tl.store(o + 768 + tl.arange(0, N), tl.sum(tl.trans(b * x), axis=1))
    tl.store(o + 896 + tl.arange(0, M), tl.sum(b + ut.T, axis=1))
    s = tl.sum(x, axis=1)
    tl.store(o + 1024 + tl.arange(0, M), tl.cumsum(s, axis=0) * 0.5 + s)
    tl.store(o + 1152 + tl.arange(0, N), tl.sum(tl.cumsum(xt * 0.25, axis=0, reverse=True).to(tl.float32), axis=1))
    tl.store(o + 1280 + tl.arange(0, N), tl.sum(tl.cumprod(tl.abs(x) * 0.01 + 0.995, axis=0), axis=0))


@triton.jit
def tiled_dot(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, AS_FP8: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * M + tl.arange(0, M)
    rn = pn * N + tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rn[:, None] * K + rk[None, :])  # [N, K]: used transposed
    if AS_FP8:
        a = a.to(tl.float8e4nv)
        b = b.to(tl.float8e4nv)
    c = tl.dot(a, tl.trans(b))
    c = tl.maximum(c, 0.0) + tl.sum(c, axis=1)[:, None] * 0.125
    tl.store(out_ptr + rm[:, None] * (N * tl.num_programs(1)) + rn[None, :], c)


@triton.jit
def quantize_rows(x_ptr, out_ptr, scale_ptr, n, FMT_MAX: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + pid * n + offs, mask=mask, other=0.0)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-4) / FMT_MAX
    tl.store(out_ptr + pid * n + offs, (x / scale).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(scale_ptr + pid, scale)


@triton.jit
def same_store_everywhere(out_ptr, flag_ptr):
    """Every program stores the same value to the same place (and its own flag)."""
    pid = tl.program_id(0)
    tl.store(out_ptr, 7.0)
    tl.store(flag_ptr + pid, pid)


# ---- kernels the grid-at-once run must leave to the sequential interpreter --------------------------------------
@triton.jit
def atomic_count(counter_ptr, x_ptr):
    pid = tl.program_id(0)
    tl.atomic_add(counter_ptr, tl.load(x_ptr + pid))


@triton.jit
def prefix_chain(x_ptr):
    """Program p reads what program p - 1 wrote: only the sequential order defines the result."""
    pid = tl.program_id(0)
    tl.store(x_ptr + pid + 1, tl.load(x_ptr + pid) * 2.0 + 1.0)


@triton.jit
def last_writer_wins(out_ptr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid // 2, pid.to(tl.float32))


@triton.jit
def bad_shape(x_ptr, n):
    pid = tl.program_id(0)
    for i in range(tl.load(x_ptr + pid)):  # Python's range over a loaded value: fine per program
        tl.store(x_ptr + 64 + pid * 8 + i, i)
    tl.store(x_ptr + 32 + pid, tl.arange(0, n))  # n is not constexpr: an error in both interpreters
