// Stand-in for a ROCm build of PyTorch's device guards: there is one device, nothing to switch.
#pragma once
#include <ATen/hip/HIPContext.h>

namespace at::hip {
struct OptionalHIPGuardMasqueradingAsCUDA
{
    template <class... A> explicit OptionalHIPGuardMasqueradingAsCUDA(A&&...) {}
};
struct HIPGuardMasqueradingAsCUDA
{
    template <class... A> explicit HIPGuardMasqueradingAsCUDA(A&&...) {}
};
} // namespace at::hip
