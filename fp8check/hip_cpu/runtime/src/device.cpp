// The device side of the HIP-on-CPU runtime: GPU threads as fibers on one OS thread, grouped in waves of
// 64 lanes; every cross-lane operation is a wave barrier (each live lane posts its value, then reads its
// source lane's); a lane that reads a lane that has already returned is counted, and the producer
// refuses such a result (undefined on a GPU). Blocks run one after another; __syncthreads is a block
// barrier. Fibers run with MXCSR FTZ|DAZ (aiter builds with -fgpu-flush-denormals-to-zero); the
// launching thread's own MXCSR is untouched.
#include "hipcpu/device.hpp"
#include "hipcpu/isa.hpp"
#include "hip/hip_runtime_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <vector>

struct hipcpu_kernel_entry { const char* name; void (*trampoline)(void**); };
extern "C" const hipcpu_kernel_entry hipcpu_kernels[];
extern "C" const int hipcpu_kernel_count;

extern "C" {
HIPCPU_EXPORT hipcpu_uint3 hipcpu_thread_idx, hipcpu_block_idx, hipcpu_block_dim, hipcpu_grid_dim;
}

namespace {

constexpr int kWave = 64;
constexpr size_t kStack = 256 * 1024;
constexpr uint32_t kFiberMxcsr = 0x9fc0;  // all exceptions masked, FTZ, DAZ, round to nearest

enum class State { runnable, cross_lane, barrier, done };
enum class Op : uint32_t { dpp = 1, bpermute, readlane, readfirstlane, ballot };

struct Lane
{
    void* sp = nullptr;
    unsigned char* stack = nullptr;
    State state = State::done;
    hipcpu_uint3 tid{};
    uint32_t lane = 0, wave = 0;
    // The cross-lane operation this lane waits in: its kind and parameters, the value it posts, the
    // source lane it reads (-1: none) and what it gets.
    uint32_t op = 0;
    int64_t key = 0;
    uint32_t value = 0, old = 0;
    int src = -1;
    bool zero_if_invalid = false;
    uint64_t result = 0;
};

struct Launch
{
    std::vector<Lane> lanes;
    void (*trampoline)(void**) = nullptr;
    void** args = nullptr;
    void* scheduler_sp = nullptr;
    Lane* current = nullptr;
};

Launch g_launch;
char g_error[512];
bool g_failed = false;
uint64_t g_undefined_reads = 0;
uint64_t g_instructions[16];

extern "C" void hipcpu_switch(void** save_sp, void* load_sp);
#if defined(__x86_64__)
// Saves the callee-saved registers on the current stack, stores the stack pointer in *save_sp, and
// resumes the context whose stack pointer is load_sp (System V AMD64 ABI). MXCSR and the x87 control word
// are the same in every fiber and the scheduler during a launch (hipcpu_launch sets and restores them).
asm(R"(
.text
.globl hipcpu_switch
.hidden hipcpu_switch
.type hipcpu_switch,@function
hipcpu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size hipcpu_switch,.-hipcpu_switch
)");
#else
#error "the hipcpu fiber switch is written for x86-64"
#endif

[[noreturn]] void to_scheduler_forever();

void enter(Lane& lane)
{
    hipcpu_thread_idx = lane.tid;
    g_launch.current = &lane;
    hipcpu_switch(&g_launch.scheduler_sp, lane.sp);
}

void yield(State state)
{
    Lane* lane = g_launch.current;
    lane->state = state;
    hipcpu_switch(&lane->sp, g_launch.scheduler_sp);
}

extern "C" void hipcpu_fiber_main()
{
    g_launch.trampoline(g_launch.args);
    Lane* lane = g_launch.current;
    lane->state = State::done;
    hipcpu_switch(&lane->sp, g_launch.scheduler_sp);
    __builtin_trap();
}

void start(Lane& lane)
{
    if(!lane.stack)
    {
        void* m = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if(m == MAP_FAILED) hipcpu_fail("cannot map a fiber stack", "mmap");
        lane.stack = static_cast<unsigned char*>(m);
    }
    uint64_t* top = reinterpret_cast<uint64_t*>(lane.stack + kStack);
    top[-1] = 0;
    top[-2] = reinterpret_cast<uint64_t>(&hipcpu_fiber_main);
    for(int i = 3; i <= 8; ++i) top[-i] = 0;  // rbp rbx r12 r13 r14 r15
    lane.sp = &top[-8];
    lane.state = State::runnable;
}

// Which lane a DPP control reads for `lane` (GFX9 encodings: AMD's DPP_CTRL enumeration in the Vega /
// CDNA ISA guides, "DPP"; LLVM's SIDefines.h DppCtrl). -1: no source (the row is out of range).
int dpp_source(int ctrl, int lane)
{
    const int row = lane & ~15, in_row = lane & 15;
    if(ctrl >= 0x000 && ctrl <= 0x0ff) return (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3);  // quad_perm
    if(ctrl >= 0x101 && ctrl <= 0x10f) { int s = in_row + (ctrl & 15); return s < 16 ? row + s : -1; }  // row_shl
    if(ctrl >= 0x111 && ctrl <= 0x11f) { int s = in_row - (ctrl & 15); return s >= 0 ? row + s : -1; }  // row_shr
    if(ctrl >= 0x121 && ctrl <= 0x12f) return row + ((in_row - (ctrl & 15)) & 15);  // row_ror
    if(ctrl == 0x130) return lane + 1 < kWave ? lane + 1 : -1;  // wave_shl:1
    if(ctrl == 0x134) return (lane + 1) % kWave;  // wave_rol:1
    if(ctrl == 0x138) return lane >= 1 ? lane - 1 : -1;  // wave_shr:1
    if(ctrl == 0x13c) return (lane + kWave - 1) % kWave;  // wave_ror:1
    if(ctrl == 0x140) return row + 15 - in_row;  // row_mirror
    if(ctrl == 0x141) return (lane & ~7) + 7 - (lane & 7);  // row_half_mirror
    if(ctrl == 0x142) return lane >= 16 ? row - 1 : -1;  // row_bcast:15, the last lane of the row before
    if(ctrl == 0x143) return lane >= 32 ? 31 : -1;  // row_bcast:31
    char what[32];
    snprintf(what, sizeof what, "DPP control 0x%x", ctrl);
    hipcpu_fail("cross-lane operation not emulated", what);
}

uint32_t exchange(Op op, int64_t key, uint32_t value, int src, uint32_t old, bool zero_if_invalid)
{
    Lane* lane = g_launch.current;
    lane->op = static_cast<uint32_t>(op);
    lane->key = key;
    lane->value = value;
    lane->src = src;
    lane->old = old;
    lane->zero_if_invalid = zero_if_invalid;
    yield(State::cross_lane);
    return static_cast<uint32_t>(g_launch.current->result);
}

// All live lanes of `wave` wait in a cross-lane operation: give each its result.
void resolve_wave(Lane* first, int count)
{
    Lane* leader = nullptr;
    for(int i = 0; i < count; ++i)
        if(first[i].state == State::cross_lane)
        {
            if(!leader) leader = &first[i];
            else if(first[i].op != leader->op || first[i].key != leader->key)
                hipcpu_fail("lanes of one wave wait in different cross-lane operations", "divergent cross-lane operation");
        }
    if(!leader) return;
    const Op op = static_cast<Op>(leader->op);
    if(op == Op::ballot)
    {
        uint64_t mask = 0;
        for(int i = 0; i < count; ++i)
            if(first[i].state == State::cross_lane && first[i].value) mask |= 1ull << first[i].lane;
        for(int i = 0; i < count; ++i)
            if(first[i].state == State::cross_lane) first[i].result = mask, first[i].state = State::runnable;
        return;
    }
    int first_live = -1;
    for(int i = 0; i < count && first_live < 0; ++i)
        if(first[i].state == State::cross_lane) first_live = i;
    for(int i = 0; i < count; ++i)
    {
        Lane& lane = first[i];
        if(lane.state != State::cross_lane) continue;
        int src = op == Op::readfirstlane ? first_live : lane.src;
        uint64_t result;
        if(src < 0)
            result = lane.zero_if_invalid ? 0 : lane.old;  // DPP with no source lane: bound_ctrl
        else if(src >= count || first[src].state != State::cross_lane)
        {
            ++g_undefined_reads;  // the source lane has returned (or does not exist): undefined on a GPU
            result = 0;
        }
        else
            result = first[src].value;
        lane.result = result;
    }
    for(int i = 0; i < count; ++i)
        if(first[i].state == State::cross_lane) first[i].state = State::runnable;
}

bool run_block(size_t nthreads)
{
    auto& lanes = g_launch.lanes;
    if(lanes.size() < nthreads) lanes.resize(nthreads);
    const hipcpu_uint3 dim = hipcpu_block_dim;
    for(size_t t = 0; t < nthreads; ++t)
    {
        Lane& lane = lanes[t];
        lane.tid = {uint32_t(t % dim.x), uint32_t(t / dim.x % dim.y), uint32_t(t / (size_t(dim.x) * dim.y))};
        lane.lane = uint32_t(t % kWave);
        lane.wave = uint32_t(t / kWave);
        start(lane);
    }
    for(;;)
    {
        for(size_t t = 0; t < nthreads; ++t)
            if(lanes[t].state == State::runnable)
            {
                enter(lanes[t]);
                if(g_failed) return false;
            }
        bool waiting_cross = false, waiting_barrier = false, released = false;
        for(size_t t = 0; t < nthreads; ++t)
            waiting_cross |= lanes[t].state == State::cross_lane, waiting_barrier |= lanes[t].state == State::barrier;
        if(!waiting_cross && !waiting_barrier) return true;  // every lane returned
        if(waiting_cross)
        {
            for(size_t w = 0; w * kWave < nthreads; ++w)
            {
                const int count = int(nthreads - w * kWave < size_t(kWave) ? nthreads - w * kWave : kWave);
                resolve_wave(&lanes[w * kWave], count);
                if(g_failed) return false;
            }
            released = true;
        }
        else
        {
            for(size_t t = 0; t < nthreads; ++t)
                if(lanes[t].state == State::barrier) lanes[t].state = State::runnable;
            released = true;
        }
        if(!released) hipcpu_fail("no lane can go on", "deadlock");
    }
}

} // namespace

extern "C" {

[[noreturn]] HIPCPU_EXPORT void hipcpu_fail(const char* what, const char* name)
{
    if(!g_failed)
    {
        snprintf(g_error, sizeof g_error, "%s: %s", what, name);
        g_failed = true;
    }
    if(g_launch.current)
        hipcpu_switch(&g_launch.current->sp, g_launch.scheduler_sp);  // never resumed
    fprintf(stderr, "hipcpu: %s\n", g_error);
    abort();
}

HIPCPU_EXPORT uint32_t hipcpu_lane_id(void) { return g_launch.current->lane; }

HIPCPU_EXPORT uint32_t hipcpu_dpp32(uint32_t old, uint32_t src, int ctrl, int row_mask, int bank_mask,
                                    bool bound_ctrl)
{
    const Lane* lane = g_launch.current;
    const int row = int(lane->lane) / 16, bank = (int(lane->lane) & 15) / 4;
    const int source = dpp_source(ctrl, int(lane->lane));
    const int64_t key = (int64_t(ctrl) << 16) | (row_mask << 8) | (bank_mask << 4) | int(bound_ctrl);
    uint32_t got = exchange(Op::dpp, key, src, source, old, bound_ctrl);
    // A row or bank the masks leave out is not written: the lane keeps `old`.
    if(!((row_mask >> row) & 1) || !((bank_mask >> bank) & 1)) return old;
    return got;
}

HIPCPU_EXPORT uint32_t hipcpu_bpermute32(int addr, uint32_t src)
{
    return exchange(Op::bpermute, 0, src, (addr >> 2) & (kWave - 1), 0, true);
}

HIPCPU_EXPORT uint32_t hipcpu_readlane32(uint32_t src, int lane)
{
    return exchange(Op::readlane, lane, src, lane & (kWave - 1), 0, true);
}

HIPCPU_EXPORT uint32_t hipcpu_readfirstlane32(uint32_t src) { return exchange(Op::readfirstlane, 0, src, 0, 0, true); }

HIPCPU_EXPORT uint64_t hipcpu_ballot(bool predicate)
{
    Lane* lane = g_launch.current;
    lane->op = static_cast<uint32_t>(Op::ballot);
    lane->key = 0;
    lane->value = predicate;
    yield(State::cross_lane);
    return g_launch.current->result;
}

HIPCPU_EXPORT void hipcpu_syncthreads(void) { yield(State::barrier); }

// Runs kernel `name` (its trampoline unpacks `args`) over the grid; false when it stopped (hipcpu_error).
HIPCPU_EXPORT bool hipcpu_launch(const char* name, dim3 grid, dim3 block, void** args, size_t shared)
{
    if(g_failed) return false;
    const hipcpu_kernel_entry* entry = nullptr;
    for(int i = 0; i < hipcpu_kernel_count; ++i)
        if(strcmp(hipcpu_kernels[i].name, name) == 0) entry = &hipcpu_kernels[i];
    if(!entry || !entry->trampoline)
    {
        snprintf(g_error, sizeof g_error, "kernel not runnable on the CPU (%s): %s",
                 entry ? "a parameter passed by value is neither a pointer nor a scalar" : "not compiled", name);
        g_failed = true;
        return false;
    }
    (void)shared;
    g_launch.trampoline = entry->trampoline;
    g_launch.args = args;
    hipcpu_block_dim = {block.x, block.y, block.z};
    hipcpu_grid_dim = {grid.x, grid.y, grid.z};
    const size_t nthreads = size_t(block.x) * block.y * block.z;
    const uint32_t host_mxcsr = __builtin_ia32_stmxcsr();
    __builtin_ia32_ldmxcsr(kFiberMxcsr);  // restored below, on every way out
    struct Restore { uint32_t value; ~Restore() { __builtin_ia32_ldmxcsr(value); } } restore{host_mxcsr};
    for(uint32_t z = 0; z < grid.z; ++z)
        for(uint32_t y = 0; y < grid.y; ++y)
            for(uint32_t x = 0; x < grid.x; ++x)
            {
                hipcpu_block_idx = {x, y, z};
                if(!run_block(nthreads)) { g_launch.current = nullptr; return false; }
            }
    g_launch.current = nullptr;
    return true;
}

HIPCPU_EXPORT const char* hipcpu_error(void) { return g_failed ? g_error : nullptr; }
HIPCPU_EXPORT uint64_t hipcpu_undefined_reads(void) { return g_undefined_reads; }
HIPCPU_EXPORT const uint64_t* hipcpu_instruction_counts(void) { return g_instructions; }
HIPCPU_EXPORT void hipcpu_reset(void)
{
    g_failed = false;
    g_error[0] = 0;
    g_undefined_reads = 0;
    memset(g_instructions, 0, sizeof g_instructions);
}

} // extern "C"
