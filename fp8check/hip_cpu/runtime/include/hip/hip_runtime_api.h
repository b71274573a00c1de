// The HIP host API as this CPU runtime provides it (src/host.cpp): one device, the arch chosen at build
// time, memory in host RAM, every stream synchronous.
#pragma once
#include <stddef.h>
#include <stdint.h>

struct dim3
{
    uint32_t x, y, z;
    constexpr dim3(uint32_t x_ = 1, uint32_t y_ = 1, uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
};

typedef enum hipError_t
{
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNotInitialized = 3,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidDeviceFunction = 98,
    hipErrorNotSupported = 801,
    hipErrorLaunchFailure = 719,
    hipErrorUnknown = 999,
} hipError_t;

typedef struct ihipStream_t* hipStream_t;
typedef struct ihipEvent_t* hipEvent_t;
typedef struct ihipModule_t* hipModule_t;
typedef struct ihipModuleSymbol_t* hipFunction_t;
typedef int hipDevice_t;

typedef enum hipMemcpyKind
{
    hipMemcpyHostToHost = 0,
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4,
} hipMemcpyKind;

typedef enum hipDeviceAttribute_t
{
    hipDeviceAttributeMaxThreadsPerBlock = 0,
    hipDeviceAttributeWarpSize = 1,
    hipDeviceAttributeMaxSharedMemoryPerBlock = 2,
    hipDeviceAttributeMultiprocessorCount = 3,
    hipDeviceAttributePciChipId = 4,
    hipDeviceAttributeMaxSharedMemoryPerMultiprocessor = 5,
    hipDeviceAttributeComputeCapabilityMajor = 6,
    hipDeviceAttributeComputeCapabilityMinor = 7,
    hipDeviceAttributeClockRate = 8,
    hipDeviceAttributeL2CacheSize = 9,
    hipDeviceAttributeMaxRegistersPerBlock = 10,
    hipDeviceAttributeSharedMemPerBlockOptin = 11,
} hipDeviceAttribute_t;

typedef struct hipDeviceProp_t
{
    char name[256];
    char gcnArchName[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    int multiProcessorCount;
    int major;
    int minor;
    int l2CacheSize;
    int maxSharedMemoryPerMultiProcessor;
    size_t sharedMemPerMultiprocessor;
    int pciBusID;
    int pciDeviceID;
} hipDeviceProp_t;

typedef struct hipFuncAttributes
{
    int binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes, maxThreadsPerBlock, numRegs,
        preferredShmemCarveout, ptxVersion;
    size_t constSizeBytes, localSizeBytes, sharedSizeBytes;
} hipFuncAttributes;

#define hipStreamDefault 0
#define hipStreamNonBlocking 1
#define hipEventDefault 0
#define hipEventDisableTiming 2

extern "C" {
hipError_t hipGetDevice(int* device);
hipError_t hipSetDevice(int device);
hipError_t hipGetDeviceCount(int* count);
hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device);
hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device);
hipError_t hipDeviceSynchronize(void);
hipError_t hipGetLastError(void);
hipError_t hipPeekAtLastError(void);
const char* hipGetErrorString(hipError_t error);
const char* hipGetErrorName(hipError_t error);
hipError_t hipMalloc(void** ptr, size_t size);
hipError_t hipMallocAsync(void** ptr, size_t size, hipStream_t stream);
hipError_t hipHostMalloc(void** ptr, size_t size, unsigned flags);
hipError_t hipFree(void* ptr);
hipError_t hipFreeAsync(void* ptr, hipStream_t stream);
hipError_t hipHostFree(void* ptr);
hipError_t hipMemcpy(void* dst, const void* src, size_t size, hipMemcpyKind kind);
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t size, hipMemcpyKind kind, hipStream_t stream);
hipError_t hipMemset(void* dst, int value, size_t size);
hipError_t hipMemsetAsync(void* dst, int value, size_t size, hipStream_t stream);
hipError_t hipStreamCreate(hipStream_t* stream);
hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned flags);
hipError_t hipStreamDestroy(hipStream_t stream);
hipError_t hipStreamSynchronize(hipStream_t stream);
hipError_t hipEventCreate(hipEvent_t* event);
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags);
hipError_t hipEventDestroy(hipEvent_t event);
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t hipEventSynchronize(hipEvent_t event);
hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop);
hipError_t hipFuncGetAttributes(hipFuncAttributes* attr, const void* func);
hipError_t hipFuncSetAttribute(const void* func, int attr, int value);
hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func, int block_size,
                                                        size_t shared);
hipError_t hipLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                           hipStream_t stream);
hipError_t hipGetFuncBySymbol(hipFunction_t* func, const void* symbol);
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, hipStream_t stream, void** params, void** extra);
hipError_t hipModuleLoad(hipModule_t* module, const char* path);
hipError_t hipModuleLoadData(hipModule_t* module, const void* image);
hipError_t hipModuleGetFunction(hipFunction_t* func, hipModule_t module, const char* name);
hipError_t hipModuleUnload(hipModule_t module);
unsigned __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shared = 0, hipStream_t stream = nullptr);
hipError_t __hipPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, hipStream_t* stream);
}

template <class T> inline hipError_t hipMalloc(T** ptr, size_t size) { return hipMalloc((void**)ptr, size); }
template <class T> inline hipError_t hipMallocAsync(T** ptr, size_t size, hipStream_t stream)
{
    return hipMallocAsync((void**)ptr, size, stream);
}
template <class T> inline hipError_t hipHostMalloc(T** ptr, size_t size, unsigned flags = 0)
{
    return hipHostMalloc((void**)ptr, size, flags);
}
template <class F> inline hipError_t hipFuncGetAttributes(hipFuncAttributes* attr, F* func)
{
    return hipFuncGetAttributes(attr, (const void*)func);
}
template <class F> inline hipError_t hipFuncSetAttribute(F* func, int attr, int value)
{
    return hipFuncSetAttribute((const void*)func, attr, value);
}
template <class F>
inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F* func, int block_size, size_t shared)
{
    return hipOccupancyMaxActiveBlocksPerMultiprocessor(blocks, (const void*)func, block_size, shared);
}
#define hipFuncAttributeMaxDynamicSharedMemorySize 8
#define HIP_LAUNCH_PARAM_BUFFER_POINTER ((void*)0x01)
#define HIP_LAUNCH_PARAM_BUFFER_SIZE ((void*)0x02)
#define HIP_LAUNCH_PARAM_END ((void*)0x03)
