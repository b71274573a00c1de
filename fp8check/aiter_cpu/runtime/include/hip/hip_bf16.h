// HIP's bfloat16 types, reduced to storage and RNE conversions.
#pragma once
#include <stdint.h>
#include "hip/hip_fp16.h"

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
struct float2_hipcpu { float x, y; };

__host__ __device__ inline float __bfloat162float(__hip_bfloat16 b) { return (float)b; }
__host__ __device__ inline __hip_bfloat16 __float2bfloat16(float f) { return __hip_bfloat16(f); }
__host__ __device__ inline __hip_bfloat162 __float22bfloat162_rn(float2_hipcpu f)
{
    return __hip_bfloat162{__hip_bfloat16(f.x), __hip_bfloat16(f.y)};
}
__host__ __device__ inline __hip_bfloat162 __bfloat162bfloat162(__hip_bfloat16 b) { return __hip_bfloat162{b, b}; }
