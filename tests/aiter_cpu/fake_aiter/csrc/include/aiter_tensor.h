// Stand-in (fp8check tests): the fields of aiter's torch-free tensor type that the producer's entry sets.
#pragma once
#include <hip/hip_runtime.h>
#include <stdint.h>
#include <string>

enum AiterDtype { AITER_DTYPE_bf16, AITER_DTYPE_u8, AITER_DTYPE_i64 };

struct aiter_tensor_t
{
    void* ptr;
    size_t numel_;
    int ndim;
    int64_t shape[8];
    int64_t strides[8];
    AiterDtype dtype_;
    int device_id;
    int64_t size(int i) const { return shape[i]; }
    void* data_ptr() const { return ptr; }
};
