// The device side of the HIP-on-CPU runtime as HIP source sees it: thread coordinates, the cross-lane
// operations of a 64-lane wave, the AMDGPU builtins that are emulated, and the inline-asm runner the
// build step rewrites each `asm` statement into. Implemented in src/device.cpp (plain C++).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__HIP__)
#define HIPCPU_FN __attribute__((host)) __attribute__((device))
#define HIPCPU_VAR __attribute__((device))
#else
#define HIPCPU_FN
#define HIPCPU_VAR
#endif
#define HIPCPU_EXPORT __attribute__((visibility("default")))

struct hipcpu_uint3 { uint32_t x, y, z; };
// Clang's AMDGPU-only builtin types, as opaque storage (what uses them is not emulated).
typedef struct { uint32_t state; } __amdgpu_named_workgroup_barrier_t;
typedef struct { uint32_t words[4]; } __amdgpu_buffer_rsrc_t;

extern "C" {
HIPCPU_VAR extern HIPCPU_EXPORT hipcpu_uint3 hipcpu_thread_idx;
HIPCPU_VAR extern HIPCPU_EXPORT hipcpu_uint3 hipcpu_block_idx;
HIPCPU_VAR extern HIPCPU_EXPORT hipcpu_uint3 hipcpu_block_dim;
HIPCPU_VAR extern HIPCPU_EXPORT hipcpu_uint3 hipcpu_grid_dim;

// Stops the running kernel: the launch returns and the run reports `what` (never a mismatch).
[[noreturn]] HIPCPU_FN HIPCPU_EXPORT void hipcpu_fail(const char* what, const char* name);
HIPCPU_FN HIPCPU_EXPORT uint32_t hipcpu_lane_id(void);
// DPP move of a 32-bit value (ctrl, row_mask, bank_mask, bound_ctrl as in __builtin_amdgcn_update_dpp).
HIPCPU_FN HIPCPU_EXPORT uint32_t hipcpu_dpp32(uint32_t old, uint32_t src, int ctrl, int row_mask, int bank_mask,
                                              bool bound_ctrl);
// ds_bpermute_b32: lane i reads lane (addr_i / 4) % 64.
HIPCPU_FN HIPCPU_EXPORT uint32_t hipcpu_bpermute32(int addr, uint32_t src);
HIPCPU_FN HIPCPU_EXPORT uint32_t hipcpu_readlane32(uint32_t src, int lane);
HIPCPU_FN HIPCPU_EXPORT uint32_t hipcpu_readfirstlane32(uint32_t src);
HIPCPU_FN HIPCPU_EXPORT uint64_t hipcpu_ballot(bool predicate);
HIPCPU_FN HIPCPU_EXPORT void hipcpu_syncthreads(void);
}

namespace hipcpu {

template <class T>
HIPCPU_FN inline T dpp(T old, T src, int ctrl, int row_mask, int bank_mask, bool bound_ctrl)
{
    static_assert(sizeof(T) % 4 == 0, "DPP moves 32-bit registers");
    uint32_t o[sizeof(T) / 4], s[sizeof(T) / 4];
    memcpy(o, &old, sizeof(T));
    memcpy(s, &src, sizeof(T));
    for(unsigned i = 0; i < sizeof(T) / 4; ++i)
        o[i] = hipcpu_dpp32(o[i], s[i], ctrl, row_mask, bank_mask, bound_ctrl);
    T out;
    memcpy(&out, o, sizeof(T));
    return out;
}

template <class T>
HIPCPU_FN inline T mov_dpp(T src, int ctrl, int row_mask, int bank_mask, bool bound_ctrl)
{
    // mov_dpp leaves a lane it does not write undefined; this runtime gives 0 there.
    return dpp(T{}, src, ctrl, row_mask, bank_mask, bound_ctrl);
}

template <class T> HIPCPU_FN inline T bits_call(T v, uint32_t (*f)(uint32_t, int), int arg)
{
    uint32_t w[(sizeof(T) + 3) / 4] = {};
    memcpy(w, &v, sizeof(T));
    for(auto& x : w) x = f(x, arg);
    T out;
    memcpy(&out, w, sizeof(T));
    return out;
}

HIPCPU_FN inline uint32_t bpermute_swapped(uint32_t v, int addr) { return hipcpu_bpermute32(addr, v); }
HIPCPU_FN inline uint32_t readlane_swapped(uint32_t v, int lane) { return hipcpu_readlane32(v, lane); }
HIPCPU_FN inline uint32_t readfirstlane_swapped(uint32_t v, int) { return hipcpu_readfirstlane32(v); }

HIPCPU_FN inline uint32_t mbcnt_lo(uint32_t mask, uint32_t acc)
{
    uint32_t lane = hipcpu_lane_id();
    uint32_t below = lane >= 32 ? 0xffffffffu : ((1u << lane) - 1u);
    return acc + __builtin_popcount(mask & below);
}

HIPCPU_FN inline uint32_t mbcnt_hi(uint32_t mask, uint32_t acc)
{
    uint32_t lane = hipcpu_lane_id();
    uint32_t below = lane < 32 ? 0u : ((lane - 32) >= 32 ? 0xffffffffu : ((1u << (lane - 32)) - 1u));
    return acc + __builtin_popcount(mask & below);
}

// A builtin this runtime does not emulate: evaluating it stops the run naming it. It converts to any
// type and can be indexed, so that code using the builtin's result compiles.
struct PoisonValue
{
    template <class T> HIPCPU_FN constexpr operator T() const { return T{}; }
};

struct Poison
{
    PoisonValue x, y, z, w;  // a builtin returning a vector: code reads its elements
    HIPCPU_FN constexpr Poison(const char* name)
    {
        if(!__builtin_is_constant_evaluated()) hipcpu_fail("builtin not emulated", name);
    }
    template <class T> HIPCPU_FN constexpr operator T() const { return T{}; }
    HIPCPU_FN constexpr Poison operator[](long) const { return *this; }
};

// Bytes: the size of the builtin's result where code bit-casts it (the _bN suffix of buffer loads).
template <int Bytes> struct PoisonOf
{
    unsigned char storage[Bytes] = {};
    HIPCPU_FN constexpr PoisonOf(const char* name)
    {
        if(!__builtin_is_constant_evaluated()) hipcpu_fail("builtin not emulated", name);
    }
    template <class T> HIPCPU_FN constexpr operator T() const { return T{}; }
    HIPCPU_FN constexpr PoisonOf operator[](long) const { return *this; }
};

namespace isa {
// One operand of a rewritten inline-asm statement: its constraint, its [name], where an output goes,
// and its register bytes (a copy of the value for inputs).
struct AsmOperand
{
    const char* constraint;
    const char* name;
    void* target;
    uint32_t size;
    alignas(16) unsigned char bytes[32];
};

template <class T>
HIPCPU_FN inline AsmOperand output(const char* constraint, const char* name, T& value)
{
    static_assert(sizeof(T) <= 32, "inline-asm operand wider than 256 bits");
    AsmOperand op{constraint, name, (void*)&value, (uint32_t)sizeof(T), {}};
    memcpy(op.bytes, (const void*)&value, sizeof(T));
    return op;
}

template <class T>
HIPCPU_FN inline AsmOperand input(const char* constraint, const char* name, const T& value)
{
    static_assert(sizeof(T) <= 32, "inline-asm operand wider than 256 bits");
    AsmOperand op{constraint, name, nullptr, (uint32_t)sizeof(T), {}};
    memcpy(op.bytes, (const void*)&value, sizeof(T));
    return op;
}
} // namespace isa
} // namespace hipcpu

extern "C" HIPCPU_FN HIPCPU_EXPORT void hipcpu_run_asm(const char* text, hipcpu::isa::AsmOperand* ops, int count);

#define threadIdx hipcpu_thread_idx
#define blockIdx hipcpu_block_idx
#define blockDim hipcpu_block_dim
#define gridDim hipcpu_grid_dim

// The emulated AMDGPU builtins (LLVM's AMDGPU builtin list, clang/include/clang/Basic/BuiltinsAMDGPU.def).
#define __builtin_amdgcn_update_dpp(old, src, ctrl, row_mask, bank_mask, bound_ctrl) \
    (::hipcpu::dpp((old), (src), (ctrl), (row_mask), (bank_mask), (bound_ctrl)))
#define __builtin_amdgcn_mov_dpp(src, ctrl, row_mask, bank_mask, bound_ctrl) \
    (::hipcpu::mov_dpp((src), (ctrl), (row_mask), (bank_mask), (bound_ctrl)))
#define __builtin_amdgcn_ds_bpermute(addr, src) ((int)hipcpu_bpermute32((addr), (uint32_t)(src)))
#define __builtin_amdgcn_readlane(src, lane) (::hipcpu::bits_call((src), ::hipcpu::readlane_swapped, (lane)))
#define __builtin_amdgcn_readfirstlane(src) (::hipcpu::bits_call((src), ::hipcpu::readfirstlane_swapped, 0))
#define __builtin_amdgcn_mbcnt_lo(mask, acc) (::hipcpu::mbcnt_lo((mask), (acc)))
#define __builtin_amdgcn_mbcnt_hi(mask, acc) (::hipcpu::mbcnt_hi((mask), (acc)))
#define __builtin_amdgcn_wavefrontsize() 64
#define __builtin_amdgcn_s_barrier() hipcpu_syncthreads()
#define __builtin_amdgcn_ballot_w64(pred) (hipcpu_ballot((pred)))
#define __builtin_amdgcn_workitem_id_x() (threadIdx.x)
#define __builtin_amdgcn_workitem_id_y() (threadIdx.y)
#define __builtin_amdgcn_workitem_id_z() (threadIdx.z)
#define __builtin_amdgcn_workgroup_id_x() (blockIdx.x)
#define __builtin_amdgcn_workgroup_id_y() (blockIdx.y)
#define __builtin_amdgcn_workgroup_id_z() (blockIdx.z)
// Ordering and scheduling hints: one OS thread runs every lane, and a lane switches only at a
// cross-lane operation or a barrier, so they change nothing here.
#define __builtin_amdgcn_fence(...) ((void)0)
#define __builtin_amdgcn_s_waitcnt(...) ((void)0)
#define __builtin_amdgcn_sched_barrier(...) ((void)0)
#define __builtin_amdgcn_sched_group_barrier(...) ((void)0)
#define __builtin_amdgcn_s_setprio(...) ((void)0)
#define __builtin_amdgcn_s_sleep(...) ((void)0)
#define __builtin_amdgcn_wave_barrier() ((void)0)

// FP8 -> f32 conversions (hipcpu/isa.hpp): the FP8 format is the arch's, as on the GPU.
#if defined(__HIP__)
#pragma clang force_cuda_host_device begin
#endif
#include "hipcpu/isa.hpp"
#if defined(__HIP__)
#pragma clang force_cuda_host_device end
#endif
namespace hipcpu {
#if defined(__gfx942__)
inline constexpr isa::Fp8 arch_fp8 = isa::Fp8::e4m3fnuz;
#else
inline constexpr isa::Fp8 arch_fp8 = isa::Fp8::e4m3fn;
#endif
HIPCPU_FN inline float cvt_f32_fp8(int src, int byte_select) { return isa::cvt_f32_fp8((uint32_t)src, byte_select, arch_fp8); }
typedef float float2_vector __attribute__((ext_vector_type(2)));
HIPCPU_FN inline float2_vector cvt_pk_f32_fp8(int src, bool word_select)
{
    const int b = word_select ? 2 : 0;
    return float2_vector{cvt_f32_fp8(src, b), cvt_f32_fp8(src, b + 1)};
}
} // namespace hipcpu
#define __builtin_amdgcn_cvt_f32_fp8(src, byte_select) (::hipcpu::cvt_f32_fp8((src), (byte_select)))
#define __builtin_amdgcn_cvt_pk_f32_fp8(src, word_select) (::hipcpu::cvt_pk_f32_fp8((src), (word_select)))

// OCML, the AMDGPU math library that HIP's and ck_tile's device math calls: here the host's libm (the
// op's path calls none of them; build.py declares the names the sources use).
#define HIPCPU_OCML(name, call) \
    template <class... A> HIPCPU_FN inline auto name(A... a) { return call; }
