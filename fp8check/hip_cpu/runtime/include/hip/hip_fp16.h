// HIP's half-precision types, reduced to what host and device code use: storage, conversions (RNE).
#pragma once
#include <stdint.h>

struct __half_raw { union { unsigned short x; _Float16 data; }; };
struct __half2_raw { union { struct { __half_raw x, y; }; _Float16 data __attribute__((ext_vector_type(2))); }; };

struct __half
{
    unsigned short __x;
    __host__ __device__ __half() = default;
    __host__ __device__ __half(float f) : __x(__builtin_bit_cast(unsigned short, (_Float16)f)) {}
    __host__ __device__ __half(__half_raw r) : __x(r.x) {}
    __host__ __device__ __half(_Float16 f) : __x(__builtin_bit_cast(unsigned short, f)) {}
    __host__ __device__ operator float() const { return (float)__builtin_bit_cast(_Float16, __x); }
    __host__ __device__ operator __half_raw() const { return __half_raw{__x}; }
};
struct __half2 { __half x, y; };
typedef __half half;
typedef __half2 half2;

__host__ __device__ inline __half __float2half(float f) { return __half(f); }
__host__ __device__ inline float __half2float(__half h) { return (float)h; }
#include "hip/hip_vector_types.h"
__host__ __device__ inline __half2 __float22half2_rn(float2 f) { return __half2{__half(f.x), __half(f.y)}; }
__host__ __device__ inline float2 __half22float2(__half2 h) { return float2((float)h.x, (float)h.y); }
__host__ __device__ inline short __half_as_short(__half h) { return (short)h.__x; }
__host__ __device__ inline unsigned short __half_as_ushort(__half h) { return h.__x; }
__host__ __device__ inline __half __short_as_half(short s) { return __half(__half_raw{{(unsigned short)s}}); }
__host__ __device__ inline __half __ushort_as_half(unsigned short s) { return __half(__half_raw{{s}}); }
__host__ __device__ inline __half __hneg(__half h) { return __half(__half_raw{{(unsigned short)(h.__x ^ 0x8000u)}}); }
