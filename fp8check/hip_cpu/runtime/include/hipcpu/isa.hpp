// The AMDGPU vector instructions this runtime emulates, as pure functions of their operands.
//
// Rules and where they come from:
// - "AMD Instinct MI300 Instruction Set Architecture" (CDNA3) and "AMD Instinct MI355X ISA" (CDNA4)
//   reference guides, section "VOP3A instructions", pseudo-code of V_MAX_F32 / V_MIN_F32 (IEEE mode:
//   a signalling NaN input gives that NaN quieted, a quiet NaN loses to a number, -0 < +0),
//   V_MAX3_F32 / V_MIN3_F32 (= two V_MAX_F32 / V_MIN_F32), V_MED3_F32 (any NaN input: V_MIN3_F32 of the
//   inputs; otherwise the median), V_PK_MUL_F32 (two IEEE products, round to nearest even) and
//   V_CVT_PK_FP8_F32 (two RNE conversions to FP8 packed into the low 16 bits, or the high 16 with
//   op_sel[3]; the other half of the destination kept).
// - LLVM, llvm/lib/Target/AMDGPU/AMDGPUInstCombineIntrinsic.cpp, constant folding of
//   llvm.amdgcn.fmed3: "if src0 is a quiet NaN the result is min(src1, src2)", consistent with the ISA rule.
// - Denormals: aiter builds with -fgpu-flush-denormals-to-zero (the f32 denormal mode "flush"): f32
//   denormal inputs read as zero of the same sign, denormal results are written as zero.
// - FP8 encodings: on gfx942 (MI300) the conversion writes E4M3 FNUZ (bias 8, max 240, no -0, one NaN
//   0x80); on gfx950 (MI355) OCP E4M3FN (bias 7, max 448, NaN S.1111.111). The op clamps with
//   V_MED3_F32 to +-max first, so the conversion sees finite in-range values on its path; out of range
//   it saturates to +-max (the clamp the op relies on), and a NaN input gives the format's NaN.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

namespace hipcpu::isa {

enum class Fp8 : int { e4m3fnuz = 0, e4m3fn = 1 };

inline uint32_t bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
inline float from_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
inline bool is_nan(float x) { return (bits(x) & 0x7fffffffu) > 0x7f800000u; }
inline bool is_snan(float x) { return is_nan(x) && !(bits(x) & 0x00400000u); }
inline float quiet(float x) { return from_bits(bits(x) | 0x00400000u); }

// f32 denormal -> zero of the same sign (denormal mode "flush").
inline float flush(float x)
{
    uint32_t u = bits(x);
    return (u & 0x7f800000u) == 0 ? from_bits(u & 0x80000000u) : x;
}

inline float max_f32(float a, float b)
{
    a = flush(a), b = flush(b);
    if(is_snan(a)) return quiet(a);
    if(is_snan(b)) return quiet(b);
    if(is_nan(a)) return b;
    if(is_nan(b)) return a;
    if(a == 0.0f && b == 0.0f) return signbit(a) ? b : a;  // -0 < +0
    return a >= b ? a : b;
}

inline float min_f32(float a, float b)
{
    a = flush(a), b = flush(b);
    if(is_snan(a)) return quiet(a);
    if(is_snan(b)) return quiet(b);
    if(is_nan(a)) return b;
    if(is_nan(b)) return a;
    if(a == 0.0f && b == 0.0f) return signbit(a) ? a : b;
    return a <= b ? a : b;
}

inline float max3_f32(float a, float b, float c) { return max_f32(max_f32(a, b), c); }
inline float min3_f32(float a, float b, float c) { return min_f32(min_f32(a, b), c); }

inline bool is_normal_bits(float x)
{
    const uint32_t e = bits(x) & 0x7f800000u;
    return e != 0 && e != 0x7f800000u;
}

inline float med3_f32(float a, float b, float c)
{
    if(is_normal_bits(a) && is_normal_bits(b) && is_normal_bits(c))  // no NaN, zero or denormal: the median
    {
        const float lo = a < b ? a : b, hi = a < b ? b : a;
        const float m = hi < c ? hi : c;
        return lo < m ? m : lo;
    }
    a = flush(a), b = flush(b), c = flush(c);
    if(is_nan(a) || is_nan(b) || is_nan(c)) return min3_f32(a, b, c);
    float m = max3_f32(a, b, c);
    if(m == a) return max_f32(b, c);
    if(m == b) return max_f32(a, c);
    return max_f32(a, b);
}

inline float mul_f32(float a, float b)
{
    // volatile: the product is rounded once, in fp32, whatever the host compiler's contraction flags.
    volatile float p = flush(a) * flush(b);
    return flush(p);
}

struct Fp8Format { int bias; double max; uint8_t max_code; uint8_t nan; bool negative_zero; };

inline Fp8Format fp8_format(Fp8 f)
{
    return f == Fp8::e4m3fnuz ? Fp8Format{8, 240.0, 0x7f, 0x80, false} : Fp8Format{7, 448.0, 0x7e, 0x7f, true};
}

// One f32 -> FP8 E4M3 conversion, round to nearest even at FP8 precision (FP8 denormals included),
// computed on the f32 bits.
inline uint8_t cvt_fp8(float x, Fp8 f)
{
    const Fp8Format fmt = fp8_format(f);
    const uint32_t u = bits(flush(x));
    const uint8_t sign = (u >> 31) ? 0x80 : 0x00;
    const uint32_t a = u & 0x7fffffffu;
    if(a > 0x7f800000u) return f == Fp8::e4m3fnuz ? fmt.nan : (uint8_t)(sign | fmt.nan);
    if(a >= 0x7f800000u) return (uint8_t)(sign | fmt.max_code);  // inf saturates
    const int emin = 1 - fmt.bias;  // the smallest normal FP8 exponent
    uint32_t code;
    if(a < (uint32_t)(127 + emin) << 23)
    {
        // below the smallest normal: multiples of 2^(emin-3); the scaling by 2^(3-emin) is exact
        code = (uint32_t)nearbyintf(from_bits(a) * ldexpf(1.0f, 3 - emin));
    }
    else
    {
        // keep 3 of the 23 mantissa bits, ties to even, then rebias the exponent
        const uint32_t rounded = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
        code = rounded - ((uint32_t)(127 - fmt.bias) << 3);
    }
    if(code > fmt.max_code) code = fmt.max_code;
    if(code == 0) return fmt.negative_zero ? sign : 0x00;
    return (uint8_t)(sign | code);
}

// V_CVT_F32_FP8: one FP8 byte of src (byte_select 0-3) to f32, exactly (every FP8 value is an f32).
inline float cvt_f32_fp8(uint32_t src, int byte_select, Fp8 f)
{
    const Fp8Format fmt = fp8_format(f);
    const uint8_t code = (uint8_t)(src >> (8 * (byte_select & 3)));
    const bool negative = code & 0x80;
    const uint32_t magnitude = code & 0x7f;
    if(f == Fp8::e4m3fnuz ? code == 0x80 : magnitude == 0x7f) return from_bits(0x7fc00000u);
    const int exponent = (int)(magnitude >> 3), mantissa = (int)(magnitude & 7);
    float v = exponent == 0 ? ldexpf((float)mantissa, -fmt.bias - 2)
                            : ldexpf((float)(8 + mantissa), exponent - fmt.bias - 3);
    return negative ? -v : v;
}

// V_CVT_PK_FP8_F32 dst, src0, src1 [op_sel:[0,0,1]]: bytes {fp8(src0), fp8(src1)} into the low half of
// dst, or the high half when word_select; the other half keeps dst's old bits.
inline uint32_t cvt_pk_fp8_f32(float src0, float src1, uint32_t old, bool word_select, Fp8 f)
{
    uint32_t pair = (uint32_t)cvt_fp8(src0, f) | ((uint32_t)cvt_fp8(src1, f) << 8);
    return word_select ? ((old & 0x0000ffffu) | (pair << 16)) : ((old & 0xffff0000u) | pair);
}

} // namespace hipcpu::isa
