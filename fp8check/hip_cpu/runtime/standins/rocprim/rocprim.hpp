// Stand-in for the two rocPRIM warp primitives aiter's torch-era hip_reduce.h uses, written from rocPRIM's
// documented semantics (rocprim/warp/detail/warp_reduce_dpp.hpp, rocprim/intrinsics/warp_shuffle.hpp):
// a DPP move of a value (lanes not written read 0) and a shuffle within `width` lanes.
#pragma once
#include <hip/hip_runtime.h>

namespace rocprim {
namespace detail {
template <class T, int dpp_ctrl, int row_mask = 0xf, int bank_mask = 0xf, bool bound_ctrl = false>
__device__ inline T warp_move_dpp(const T& input)
{
    return ::hipcpu::dpp(T{}, input, dpp_ctrl, row_mask, bank_mask, bound_ctrl);
}
} // namespace detail

template <class T> __device__ inline T warp_shuffle(const T& input, int src_lane, int width = 64)
{
    return __shfl(input, src_lane, width);
}

__device__ inline unsigned lane_id() { return __lane_id(); }
} // namespace rocprim
