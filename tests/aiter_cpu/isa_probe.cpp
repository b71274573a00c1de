// Exposes the emulated instructions (fp8check/hip_cpu/runtime/include/hipcpu/isa.hpp) to the tests.
#include "hipcpu/isa.hpp"

using namespace hipcpu::isa;
extern "C" {
float probe_max3(float a, float b, float c) { return max3_f32(a, b, c); }
float probe_min3(float a, float b, float c) { return min3_f32(a, b, c); }
float probe_med3(float a, float b, float c) { return med3_f32(a, b, c); }
float probe_mul(float a, float b) { return mul_f32(a, b); }
unsigned probe_cvt_pk(float a, float b, unsigned old, int word_select, int fnuz)
{
    return cvt_pk_fp8_f32(a, b, old, word_select != 0, fnuz ? Fp8::e4m3fnuz : Fp8::e4m3fn);
}
}
extern "C" float probe_cvt_f32(unsigned src, int byte_select, int fnuz)
{
    return cvt_f32_fp8(src, byte_select, fnuz ? Fp8::e4m3fnuz : Fp8::e4m3fn);
}
