// HIP's bfloat16 types, reduced to storage and RNE conversions.
#pragma once
#include <math.h>
#include <stdint.h>
#include "hip/hip_fp16.h"
#include "hip/hip_vector_types.h"

struct __hip_bfloat16_raw { unsigned short x; };
struct __hip_bfloat16
{
    unsigned short data;
    __host__ __device__ __hip_bfloat16() = default;
    __host__ __device__ __hip_bfloat16(float f) : data(__builtin_bit_cast(unsigned short, (__bf16)f)) {}
    __host__ __device__ __hip_bfloat16(__bf16 b) : data(__builtin_bit_cast(unsigned short, b)) {}
    __host__ __device__ operator float() const { return (float)__builtin_bit_cast(__bf16, data); }
};
struct __hip_bfloat162 { __hip_bfloat16 x, y; };
typedef __hip_bfloat16 hip_bfloat16_t;

__host__ __device__ inline float __bfloat162float(__hip_bfloat16 b) { return (float)b; }
__host__ __device__ inline __hip_bfloat16 __float2bfloat16(float f) { return __hip_bfloat16(f); }
__host__ __device__ inline __hip_bfloat162 __float22bfloat162_rn(float2 f)
{
    return __hip_bfloat162{__hip_bfloat16(f.x), __hip_bfloat16(f.y)};
}
__host__ __device__ inline __hip_bfloat162 __bfloat162bfloat162(__hip_bfloat16 b) { return __hip_bfloat162{b, b}; }
__host__ __device__ inline float2 __bfloat1622float2(__hip_bfloat162 b) { return float2((float)b.x, (float)b.y); }
// Arithmetic in fp32, one rounding to bf16 (RNE), as HIP's bf16 helpers compute it.
__host__ __device__ inline __hip_bfloat16 __hadd(__hip_bfloat16 a, __hip_bfloat16 b) { return __hip_bfloat16((float)a + (float)b); }
__host__ __device__ inline __hip_bfloat16 __hmul(__hip_bfloat16 a, __hip_bfloat16 b) { return __hip_bfloat16((float)a * (float)b); }
__host__ __device__ inline __hip_bfloat16 __hsub(__hip_bfloat16 a, __hip_bfloat16 b) { return __hip_bfloat16((float)a - (float)b); }
__host__ __device__ inline __hip_bfloat16 __hfma(__hip_bfloat16 a, __hip_bfloat16 b, __hip_bfloat16 c) { return __hip_bfloat16(fmaf((float)a, (float)b, (float)c)); }
__host__ __device__ inline __hip_bfloat162 __hadd2(__hip_bfloat162 a, __hip_bfloat162 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
__host__ __device__ inline __hip_bfloat162 __hmul2(__hip_bfloat162 a, __hip_bfloat162 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }
__host__ __device__ inline __hip_bfloat162 __hfma2(__hip_bfloat162 a, __hip_bfloat162 b, __hip_bfloat162 c) { return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }
__host__ __device__ inline __hip_bfloat16 __ushort_as_bfloat16(unsigned short u) { __hip_bfloat16 b; b.data = u; return b; }
__host__ __device__ inline unsigned short __bfloat16_as_ushort(__hip_bfloat16 b) { return b.data; }
