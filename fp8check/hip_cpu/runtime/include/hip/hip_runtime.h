// HIP's device-side library on top of the hipcpu runtime (the prelude is force-included before this).
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <limits.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include "hip/hip_runtime_api.h"
#include "hip/hip_vector_types.h"
#include "hipcpu/device.hpp"

#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...) \
    kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__)

static constexpr int warpSize = 64;
__device__ inline unsigned __lane_id() { return hipcpu_lane_id(); }
__device__ inline void __syncthreads() { hipcpu_syncthreads(); }
__device__ inline void __threadfence() {}
__device__ inline void __threadfence_block() {}
__device__ inline void __builtin_amdgcn_s_barrier_fallback() {}
__device__ inline uint64_t __ballot(int predicate) { return hipcpu_ballot(predicate != 0); }
__device__ inline uint64_t __activemask() { return hipcpu_ballot(true); }
__device__ inline int __any(int predicate) { return hipcpu_ballot(predicate != 0) != 0; }
__device__ inline int __all(int predicate) { return hipcpu_ballot(predicate != 0) == hipcpu_ballot(true); }

// HIP's shuffles as ROCm writes them (amd_warp_functions.h): an index rule, then ds_bpermute.
template <class T> __device__ inline T hipcpu_bpermute(int index, T var)
{
    return ::hipcpu::bits_call(var, ::hipcpu::bpermute_swapped, index << 2);
}
template <class T> __device__ inline T __shfl(T var, int src_lane, int width = 64)
{
    int self = __lane_id();
    int index = src_lane + (self & ~(width - 1));
    return hipcpu_bpermute(index, var);
}
template <class T> __device__ inline T __shfl_xor(T var, int lane_mask, int width = 64)
{
    int self = __lane_id();
    int index = self ^ lane_mask;
    index = index >= ((self + width) & ~(width - 1)) ? self : index;
    return hipcpu_bpermute(index, var);
}
template <class T> __device__ inline T __shfl_down(T var, unsigned delta, int width = 64)
{
    int self = __lane_id();
    int index = self + delta;
    index = (int)((self & (width - 1)) + delta) >= width ? self : index;
    return hipcpu_bpermute(index, var);
}
template <class T> __device__ inline T __shfl_up(T var, unsigned delta, int width = 64)
{
    int self = __lane_id();
    int index = self - delta;
    index = (index < (self & ~(width - 1))) ? self : index;
    return hipcpu_bpermute(index, var);
}
template <class M, class T> __device__ inline T __shfl_sync(M, T var, int src, int width = 64) { return __shfl(var, src, width); }
template <class M, class T> __device__ inline T __shfl_xor_sync(M, T var, int m, int width = 64) { return __shfl_xor(var, m, width); }
template <class M, class T> __device__ inline T __shfl_down_sync(M, T var, unsigned d, int width = 64) { return __shfl_down(var, d, width); }
template <class M, class T> __device__ inline T __shfl_up_sync(M, T var, unsigned d, int width = 64) { return __shfl_up(var, d, width); }

// Atomics: every lane runs on one OS thread and switches only at a cross-lane operation or a barrier,
// so a read-modify-write is indivisible.
template <class T, class U> __device__ inline T atomicAdd(T* p, U v) { T old = *p; *p = old + v; return old; }
template <class T> __device__ inline T atomicSub(T* p, T v) { T old = *p; *p = old - v; return old; }
template <class T> __device__ inline T atomicMax(T* p, T v) { T old = *p; *p = old < v ? v : old; return old; }
template <class T> __device__ inline T atomicMin(T* p, T v) { T old = *p; *p = v < old ? v : old; return old; }
template <class T> __device__ inline T atomicExch(T* p, T v) { T old = *p; *p = v; return old; }
template <class T> __device__ inline T atomicOr(T* p, T v) { T old = *p; *p = old | v; return old; }
template <class T> __device__ inline T atomicAnd(T* p, T v) { T old = *p; *p = old & v; return old; }
template <class T> __device__ inline T atomicCAS(T* p, T cmp, T v) { T old = *p; if(old == cmp) *p = v; return old; }

__device__ inline uint64_t __clock64() { return 0; }
__device__ inline uint64_t clock64() { return 0; }
__device__ inline uint64_t wall_clock64() { return 0; }
__device__ inline float __fdividef(float a, float b) { return a / b; }
__device__ inline float __frcp_rn(float a) { return 1.0f / a; }
__device__ inline float __saturatef(float a) { return a < 0.0f ? 0.0f : (a > 1.0f ? 1.0f : a); }
__device__ inline int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
__device__ inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
__device__ inline float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
__device__ inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
__device__ inline int __popc(unsigned x) { return __builtin_popcount(x); }
__device__ inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__device__ inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
__device__ inline int __ffs(int x) { return __builtin_ffs(x); }
__device__ inline int __ffsll(long long x) { return __builtin_ffsll(x); }

#include "hip/hip_fp16.h"
__device__ inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
__device__ inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
__device__ inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
__device__ inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
