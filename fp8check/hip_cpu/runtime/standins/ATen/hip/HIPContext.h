// Stand-in for a ROCm build of PyTorch's ATen/hip/HIPContext.h, for aiter's torch-based releases built
// for the CPU: one device, a null (synchronous) stream.
#pragma once
#include <hip/hip_runtime.h>
#include <ATen/ATen.h>

namespace at::hip {
struct HIPStreamMasqueradingAsCUDA
{
    hipStream_t value = nullptr;
    operator hipStream_t() const { return value; }
    hipStream_t stream() const { return value; }
};
inline HIPStreamMasqueradingAsCUDA getCurrentHIPStream(int = -1) { return {}; }
inline HIPStreamMasqueradingAsCUDA getCurrentHIPStreamMasqueradingAsCUDA(int = -1) { return {}; }
inline hipDeviceProp_t* getCurrentDeviceProperties()
{
    static hipDeviceProp_t prop;
    hipGetDeviceProperties(&prop, 0);
    return &prop;
}
} // namespace at::hip
namespace at::cuda {
using at::hip::getCurrentDeviceProperties;
}
