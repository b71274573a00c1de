// HIP's half-precision types, reduced to what host and device code use: storage, conversions (RNE).
#pragma once
#include <stdint.h>

struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };

struct __half
{
    unsigned short __x;
    __host__ __device__ __half() = default;
    __host__ __device__ __half(float f) : __x(__builtin_bit_cast(unsigned short, (_Float16)f)) {}
    __host__ __device__ __half(__half_raw r) : __x(r.x) {}
    __host__ __device__ operator float() const { return (float)__builtin_bit_cast(_Float16, __x); }
    __host__ __device__ operator __half_raw() const { return __half_raw{__x}; }
};
struct __half2 { __half x, y; };
typedef __half half;
typedef __half2 half2;

__host__ __device__ inline __half __float2half(float f) { return __half(f); }
__host__ __device__ inline float __half2float(__half h) { return (float)h; }
