#pragma once
#include <stdint.h>
struct hip_bfloat16
{
    uint16_t data;
    __host__ __device__ hip_bfloat16() = default;
    __host__ __device__ explicit hip_bfloat16(float f) : data(__builtin_bit_cast(uint16_t, (__bf16)f)) {}
    __host__ __device__ operator float() const { return (float)__builtin_bit_cast(__bf16, data); }
};
