// Force-included first in both clang passes (host: -x hip; device: -fcuda-is-device, x86-64 target).
// It stands in for the HIP compiler's own prelude: the execution-space attributes, the macros ROCm's
// hipcc defines, and the AMDGPU builtins this runtime emulates (hipcpu/device.hpp). Every other
// __builtin_amdgcn_* name the staged sources mention is defined as a poison value by the generated
// header hipcpu/poison.hpp: executing it stops the run naming the builtin.
#pragma once
#define __HIPCC__ 1
#define __HIP__ 1
#define __HIP_PLATFORM_AMD__ 1
#define __HIP_PLATFORM_HCC__ 1
#include "hip/hip_version.h"

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __grid_constant__

// The C library (and <cmath>'s overloads of it) is callable from device code, as HIP's
// own wrapper headers make them: on x86-64 a device call of `expf` is the host's `expf`.
// <new> and the C++ library's algorithm base stay outside: the implicit declarations of operator
// new/delete are host functions, and libstdc++ redeclares its algorithms later as host functions.
#include <new>
#include <limits>
#include <type_traits>
#include <bits/stl_algobase.h>
#pragma clang force_cuda_host_device begin
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#pragma clang force_cuda_host_device end
// The float-suffixed C functions in std, as HIP's math headers (and libc++) provide them.
namespace std {
using ::acosf; using ::asinf; using ::atanf; using ::atan2f; using ::ceilf; using ::cosf; using ::coshf;
using ::expf; using ::exp2f; using ::fabsf; using ::floorf; using ::fmaxf; using ::fminf; using ::fmodf;
using ::log2f; using ::log10f; using ::logf; using ::powf; using ::roundf; using ::sinf; using ::sinhf;
using ::sqrtf; using ::tanf; using ::tanhf; using ::truncf; using ::rintf; using ::nearbyintf;
} // namespace std

#include "hipcpu/device.hpp"
#if __has_include("hipcpu/poison.hpp")
#include "hipcpu/poison.hpp"
#endif
