// Kernels written for fp8check's tests in the style of aiter's cache kernels: wave-64 blocks of 8x8
// lanes, a per-lane amax through inline v_max3_f32, a row reduction through three DPP moves, early
// exits, and the v_pk_mul_f32 / v_med3_f32 / v_cvt_pk_fp8_f32 conversion sequence.
#include <hip/hip_runtime.h>
#include <stdint.h>

namespace testk {

typedef float fp32x2_t __attribute__((ext_vector_type(2)));

template <int ctrl> __device__ inline float move_dpp(float x)
{
    return __builtin_bit_cast(float, __builtin_amdgcn_mov_dpp(__builtin_bit_cast(int, x), ctrl, 0xf, 0xf, false));
}

__device__ inline float row8_max(float v)
{
    v = fmaxf(move_dpp<0xb1>(v), v);
    v = fmaxf(move_dpp<0x4e>(v), v);
    v = fmaxf(move_dpp<0x141>(v), v);
    return v;
}

__device__ inline uint16_t to_fp8x2(float a, float b, float inv_scale)
{
    fp32x2_t in{a, b}, s{inv_scale, inv_scale}, p;
    asm volatile("v_pk_mul_f32 %0, %1, %2" : "=v"(p) : "v"(in), "v"(s));
    float x = p[0], y = p[1];
#if defined(__gfx942__)
    const float hi = 240.0f, lo = -240.0f;
#else
    const float hi = 448.0f, lo = -448.0f;
#endif
    int w;
    asm volatile("v_med3_f32 %1, %1, %3, %4\n"
                 "v_med3_f32 %2, %2, %3, %4\n"
                 "v_cvt_pk_fp8_f32 %0, %1, %2"
                 : "=v"(w), "+v"(x), "+v"(y)
                 : "v"(lo), "v"(hi));
    return (uint16_t)w;
}

// One row of 8 lanes quantizes one group of 128 floats; rows past `groups` return at once.
__global__ void quant_groups(const float* x, uint8_t* out, float* scales, int groups, int skip_row)
{
    const int group = blockIdx.x * 8 + threadIdx.y;
    if(group >= groups || group == skip_row) return;
    const float* v = x + group * 128 + threadIdx.x * 16;
    float amax = 0.0f;
    for(int i = 0; i < 16; i += 2)
        asm volatile("v_max3_f32 %0, %1, %2, %3\n" : "=v"(amax) : "v"(amax), "v"(fabsf(v[i])), "v"(fabsf(v[i + 1])));
    amax = row8_max(amax);
#if defined(__gfx942__)
    float scale = fmaxf(amax, 1e-4f) / 240.0f;
#else
    float scale = fmaxf(amax, 1e-4f) / 448.0f;
#endif
    if(threadIdx.x == 0) scales[group] = scale;
    const float inv = 1.0f / scale;
    uint8_t* o = out + group * 128 + threadIdx.x * 16;
    for(int i = 0; i < 16; i += 2)
    {
        uint16_t pair = to_fp8x2(v[i], v[i + 1], inv);
        o[i] = pair & 0xff;
        o[i + 1] = pair >> 8;
    }
}

// Every lane publishes the DPP move `ctrl` of its own lane id.
template <int ctrl, int row_mask, int bank_mask, bool bound_ctrl>
__global__ void dpp_probe(int* out, int old)
{
    int lane = threadIdx.x;
    out[lane] = __builtin_amdgcn_update_dpp(old, lane * 10 + 1, ctrl, row_mask, bank_mask, bound_ctrl);
}

// Lanes at or above `live` return first; the rest read lane (self ^ 4) through __shfl_xor.
__global__ void early_exit_shfl(int* out, int live)
{
    int lane = threadIdx.x;
    if(lane >= live) return;
    out[lane] = __shfl_xor(lane * 3, 4, 8);
}

__global__ void uses_unemulated(float* out)
{
    float r;
    asm volatile("v_exp_f32 %0, %1" : "=v"(r) : "v"(out[0]));
    out[0] = r;
}

__global__ void uses_poisoned(int* out) { out[0] = __builtin_amdgcn_permlanex16(0, out[0], 0, 0, false, false); }

__global__ void block_sum(const int* in, int* out)
{
    __shared__ int partial[256];
    int t = threadIdx.x;
    partial[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for(int s = 128; s > 0; s >>= 1)
    {
        if(t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if(t == 0) out[blockIdx.x] = partial[0];
}

} // namespace testk

extern "C" {
int run_quant(const float* x, uint8_t* out, float* scales, int groups, int skip_row)
{
    testk::quant_groups<<<dim3((groups + 7) / 8), dim3(8, 8)>>>(x, out, scales, groups, skip_row);
    return hipGetLastError();
}
int run_dpp(int which, int* out, int old)
{
    switch(which)
    {
    case 0: testk::dpp_probe<0xb1, 0xf, 0xf, false><<<1, 64>>>(out, old); break;
    case 1: testk::dpp_probe<0x4e, 0xf, 0xf, false><<<1, 64>>>(out, old); break;
    case 2: testk::dpp_probe<0x141, 0xf, 0xf, false><<<1, 64>>>(out, old); break;
    case 3: testk::dpp_probe<0x140, 0xf, 0xf, false><<<1, 64>>>(out, old); break;
    case 4: testk::dpp_probe<0x111, 0xf, 0xf, true><<<1, 64>>>(out, old); break;
    case 5: testk::dpp_probe<0x111, 0xf, 0xf, false><<<1, 64>>>(out, old); break;
    case 6: testk::dpp_probe<0x142, 0xa, 0xf, false><<<1, 64>>>(out, old); break;
    case 7: testk::dpp_probe<0x143, 0xc, 0xf, false><<<1, 64>>>(out, old); break;
    case 8: testk::dpp_probe<0x101, 0xf, 0x5, false><<<1, 64>>>(out, old); break;
    default: return -1;
    }
    return hipGetLastError();
}
int run_early_exit(int* out, int live)
{
    testk::early_exit_shfl<<<1, 64>>>(out, live);
    return hipGetLastError();
}
int run_unemulated(float* out)
{
    testk::uses_unemulated<<<1, 1>>>(out);
    return hipGetLastError();
}
int run_poisoned(int* out)
{
    testk::uses_poisoned<<<1, 1>>>(out);
    return hipGetLastError();
}
int run_block_sum(const int* in, int* out, int blocks)
{
    testk::block_sum<<<blocks, 256>>>(in, out);
    return hipGetLastError();
}
}
