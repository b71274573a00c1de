// The host side of the HIP-on-CPU runtime: what clang's HIP host pass calls (kernel registration, the
// launch configuration stack, hipLaunchKernel) and the HIP API the sources' host code uses. One
// device, named by the arch it was built for; memory is host memory; every stream is synchronous.
#include "hip/hip_runtime_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#ifndef HIPCPU_ARCH
#define HIPCPU_ARCH "gfx950"
#endif

extern "C" bool hipcpu_launch(const char* name, dim3 grid, dim3 block, void** args, size_t shared);

namespace {
struct Kernel { const void* handle; const char* name; };
std::vector<Kernel> g_kernels;
struct Config { dim3 grid, block; size_t shared; hipStream_t stream; };
std::vector<Config> g_configs;
hipError_t g_last = hipSuccess;

hipError_t fail(hipError_t e) { g_last = e; return e; }
}

extern "C" {

void** __hipRegisterFatBinary(const void*) { static void* module = nullptr; return &module; }
void __hipUnregisterFatBinary(void**) {}
void __hipRegisterFunction(void**, const void* handle, char*, const char* name, unsigned, void*, void*, void*,
                           void*, int*)
{
    g_kernels.push_back({handle, name});
}
void __hipRegisterVar(void**, void*, char*, const char*, int, size_t, int, int) {}
void __hipRegisterManagedVar(void*, void**, void*, const char*, size_t, unsigned) {}
void __hipRegisterSurface(void**, void*, char*, const char*, int, int) {}
void __hipRegisterTexture(void**, void*, char*, const char*, int, int, int) {}

unsigned __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shared, hipStream_t stream)
{
    g_configs.push_back({grid, block, shared, stream});
    return 0;
}

hipError_t __hipPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, hipStream_t* stream)
{
    Config c = g_configs.back();
    g_configs.pop_back();
    *grid = c.grid, *block = c.block, *shared = c.shared, *stream = c.stream;
    return hipSuccess;
}

hipError_t hipLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared, hipStream_t)
{
    for(const Kernel& k : g_kernels)
        if(k.handle == func)
            return hipcpu_launch(k.name, grid, block, args, shared) ? hipSuccess : fail(hipErrorLaunchFailure);
    return fail(hipErrorInvalidDeviceFunction);
}

hipError_t hipGetDevice(int* device) { *device = 0; return hipSuccess; }
hipError_t hipSetDevice(int device) { return device == 0 ? hipSuccess : fail(hipErrorInvalidDevice); }
hipError_t hipGetDeviceCount(int* count) { *count = 1; return hipSuccess; }
hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int)
{
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "hipcpu (%s on the CPU)", HIPCPU_ARCH);
    snprintf(prop->gcnArchName, sizeof prop->gcnArchName, "%s", HIPCPU_ARCH);
    prop->warpSize = 64;
    prop->maxThreadsPerBlock = 1024;
    prop->multiProcessorCount = 1;
    prop->sharedMemPerBlock = 65536;
    prop->maxSharedMemoryPerMultiProcessor = 65536;
    prop->sharedMemPerMultiprocessor = 65536;
    prop->major = 9;
    return hipSuccess;
}
hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int)
{
    switch(attr)
    {
    case hipDeviceAttributeWarpSize: *value = 64; break;
    case hipDeviceAttributeMaxThreadsPerBlock: *value = 1024; break;
    case hipDeviceAttributeMultiprocessorCount: *value = 1; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock:
    case hipDeviceAttributeMaxSharedMemoryPerMultiprocessor:
    case hipDeviceAttributeSharedMemPerBlockOptin: *value = 65536; break;
    default: *value = 0;
    }
    return hipSuccess;
}
hipError_t hipDeviceSynchronize(void) { return hipSuccess; }
hipError_t hipGetLastError(void) { hipError_t e = g_last; g_last = hipSuccess; return e; }
hipError_t hipPeekAtLastError(void) { return g_last; }
const char* hipGetErrorString(hipError_t e) { return e == hipSuccess ? "no error" : "hipcpu error"; }
const char* hipGetErrorName(hipError_t e) { return e == hipSuccess ? "hipSuccess" : "hipErrorUnknown"; }
hipError_t hipMalloc(void** ptr, size_t size) { *ptr = calloc(1, size ? size : 1); return *ptr ? hipSuccess : fail(hipErrorOutOfMemory); }
hipError_t hipMallocAsync(void** ptr, size_t size, hipStream_t) { return hipMalloc(ptr, size); }
hipError_t hipHostMalloc(void** ptr, size_t size, unsigned) { return hipMalloc(ptr, size); }
hipError_t hipFree(void* ptr) { free(ptr); return hipSuccess; }
hipError_t hipFreeAsync(void* ptr, hipStream_t) { free(ptr); return hipSuccess; }
hipError_t hipHostFree(void* ptr) { free(ptr); return hipSuccess; }
hipError_t hipMemcpy(void* dst, const void* src, size_t size, hipMemcpyKind) { memmove(dst, src, size); return hipSuccess; }
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t size, hipMemcpyKind k, hipStream_t) { return hipMemcpy(dst, src, size, k); }
hipError_t hipMemset(void* dst, int value, size_t size) { memset(dst, value, size); return hipSuccess; }
hipError_t hipMemsetAsync(void* dst, int value, size_t size, hipStream_t) { return hipMemset(dst, value, size); }
hipError_t hipStreamCreate(hipStream_t* stream) { *stream = nullptr; return hipSuccess; }
hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned) { *stream = nullptr; return hipSuccess; }
hipError_t hipStreamDestroy(hipStream_t) { return hipSuccess; }
hipError_t hipStreamSynchronize(hipStream_t) { return hipSuccess; }
hipError_t hipEventCreate(hipEvent_t* event) { *event = nullptr; return hipSuccess; }
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned) { *event = nullptr; return hipSuccess; }
hipError_t hipEventDestroy(hipEvent_t) { return hipSuccess; }
hipError_t hipEventRecord(hipEvent_t, hipStream_t) { return hipSuccess; }
hipError_t hipEventSynchronize(hipEvent_t) { return hipSuccess; }
hipError_t hipEventElapsedTime(float* ms, hipEvent_t, hipEvent_t) { *ms = 0; return hipSuccess; }
hipError_t hipFuncGetAttributes(hipFuncAttributes* attr, const void*) { memset(attr, 0, sizeof *attr); attr->maxThreadsPerBlock = 1024; return hipSuccess; }
hipError_t hipFuncSetAttribute(const void*, int, int) { return hipSuccess; }
hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int, size_t) { *blocks = 1; return hipSuccess; }
hipError_t hipGetFuncBySymbol(hipFunction_t*, const void*) { return fail(hipErrorNotSupported); }
hipError_t hipModuleLaunchKernel(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 hipStream_t, void**, void**) { return fail(hipErrorNotSupported); }
hipError_t hipModuleLoad(hipModule_t*, const char*) { return fail(hipErrorNotSupported); }
hipError_t hipModuleLoadData(hipModule_t*, const void*) { return fail(hipErrorNotSupported); }
hipError_t hipModuleGetFunction(hipFunction_t*, hipModule_t, const char*) { return fail(hipErrorNotSupported); }
hipError_t hipModuleUnload(hipModule_t) { return hipSuccess; }

} // extern "C"
