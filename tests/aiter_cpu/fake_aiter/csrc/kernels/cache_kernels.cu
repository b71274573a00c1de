// Stand-in (fp8check tests): an indexer K quantize-and-cache op written in aiter's style.
#include "aiter_tensor.h"
#include <hip/hip_runtime.h>
#include <stdexcept>

namespace aiter {

typedef float fp32x2_t __attribute__((ext_vector_type(2)));

template <int ctrl> __device__ inline float move_dpp(float x)
{
    return __builtin_bit_cast(float, __builtin_amdgcn_mov_dpp(__builtin_bit_cast(int, x), ctrl, 0xf, 0xf, false));
}

template <bool fnuz> __device__ inline uint16_t to_fp8x2(float a, float b, float inv)
{
    fp32x2_t in{a, b}, s{inv, inv}, p;
    asm volatile("v_pk_mul_f32 %0, %1, %2" : "=v"(p) : "v"(in), "v"(s));
    float x = p[0], y = p[1];
    const float hi = fnuz ? 240.0f : 448.0f, lo = -hi;
    int w;
    asm volatile("v_med3_f32 %1, %1, %3, %4\n"
                 "v_med3_f32 %2, %2, %3, %4\n"
                 "v_cvt_pk_fp8_f32 %0, %1, %2"
                 : "=v"(w), "+v"(x), "+v"(y)
                 : "v"(lo), "v"(hi));
    return (uint16_t)w;
}

// As in aiter, the FP8 format is the device arch's: e4m3fnuz on gfx942, e4m3fn elsewhere.
#if defined(__gfx942__)
constexpr bool fnuz = true;
#else
constexpr bool fnuz = false;
#endif

__global__ void quant_kernel(const __bf16* k, uint8_t* cache, const int64_t* slots, int num_tokens, int head_dim,
                             int qbs, int block_size, int stride, bool ue8m0, bool preshuffle)
{
    const int groups = head_dim / qbs;
    const int row = blockIdx.x * 8 + threadIdx.y;
    const int64_t token = row / groups;
    if(token >= num_tokens) return;
    const int64_t slot = slots[token];
    const int dim = row % groups * qbs + threadIdx.x * 16;
    if(slot < 0 || dim >= head_dim) return;
    const __bf16* v = k + token * head_dim + dim;
    float amax = 0.0f;
    for(int i = 0; i < 16; i += 2)
        asm volatile("v_max3_f32 %0, %1, %2, %3" : "=v"(amax) : "v"(amax), "v"(fabsf((float)v[i])), "v"(fabsf((float)v[i + 1])));
    amax = fmaxf(move_dpp<0xb1>(amax), amax);
    amax = fmaxf(move_dpp<0x4e>(amax), amax);
    amax = fmaxf(move_dpp<0x141>(amax), amax);
    float scale = fmaxf(amax, 1e-4) / (fnuz ? 240.0f : 448.0f);
    if(ue8m0) scale = exp2f(ceilf(log2f(scale)));
    const int64_t block = slot / block_size, offset = slot % block_size;
    uint8_t* base = cache + block * block_size * stride;
    if(threadIdx.x == 0) reinterpret_cast<float*>(base + block_size * head_dim)[(offset * head_dim + dim) / qbs] = scale;
    const float inv = 1.0f / scale;
    for(int i = 0; i < 16; i += 2)
    {
        uint16_t pair = to_fp8x2<fnuz>((float)v[i], (float)v[i + 1], inv);
        for(int j = 0; j < 2; ++j)
        {
            const int d = dim + i + j;
            const int64_t at = preshuffle ? (offset / 16) * 16 * head_dim + (d / 16) * 256 + (offset % 16) * 16 + d % 16
                                          : offset * head_dim + d;
            base[at] = (uint8_t)(pair >> (8 * j));
        }
    }
}

void indexer_k_quant_and_cache(aiter_tensor_t& k, aiter_tensor_t& kv_cache, aiter_tensor_t& slot_mapping,
                               int64_t quant_block_size, const std::string& scale_fmt, bool preshuffle)
{
    const int num_tokens = (int)k.size(0), head_dim = (int)k.size(1);
    if(head_dim % quant_block_size != 0) throw std::invalid_argument("head_dim must be divisible by quant_block_size");
    const int rows = num_tokens * head_dim / (int)quant_block_size;
    dim3 grid((rows + 7) / 8), block(8, 8);
    quant_kernel<<<grid, block>>>((const __bf16*)k.data_ptr(), (uint8_t*)kv_cache.data_ptr(),
                                 (const int64_t*)slot_mapping.data_ptr(), num_tokens, head_dim, (int)quant_block_size,
                                 (int)kv_cache.size(1), (int)kv_cache.size(2), scale_fmt == "ue8m0", preshuffle);
}

} // namespace aiter
