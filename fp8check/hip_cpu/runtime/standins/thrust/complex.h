// Stand-in for the Thrust complex type and functions PyTorch's headers name under HIP (c10::complex
// converts to and from it; its math forwards to them). Host functions over std::complex.
#pragma once
#include <complex>

namespace thrust {
template <class T> struct complex
{
    T re{}, im{};
    __host__ __device__ constexpr complex(T r = T(), T i = T()) : re(r), im(i) {}
    template <class U> __host__ __device__ constexpr complex(const complex<U>& o) : re(T(o.re)), im(T(o.im)) {}
    __host__ __device__ constexpr T real() const { return re; }
    __host__ __device__ constexpr T imag() const { return im; }
};

template <class T> inline std::complex<T> to_std(const complex<T>& z) { return {z.re, z.im}; }
template <class T> inline complex<T> from_std(const std::complex<T>& z) { return {z.real(), z.imag()}; }

#define HIPCPU_THRUST_UNARY(name) \
    template <class T> inline complex<T> name(const complex<T>& z) { return from_std(std::name(to_std(z))); }
HIPCPU_THRUST_UNARY(exp)
HIPCPU_THRUST_UNARY(log)
HIPCPU_THRUST_UNARY(log10)
HIPCPU_THRUST_UNARY(sqrt)
HIPCPU_THRUST_UNARY(sin)
HIPCPU_THRUST_UNARY(cos)
HIPCPU_THRUST_UNARY(tan)
HIPCPU_THRUST_UNARY(asin)
HIPCPU_THRUST_UNARY(acos)
HIPCPU_THRUST_UNARY(atan)
HIPCPU_THRUST_UNARY(sinh)
HIPCPU_THRUST_UNARY(cosh)
HIPCPU_THRUST_UNARY(tanh)
HIPCPU_THRUST_UNARY(asinh)
HIPCPU_THRUST_UNARY(acosh)
HIPCPU_THRUST_UNARY(atanh)
#undef HIPCPU_THRUST_UNARY
template <class T> inline T abs(const complex<T>& z) { return std::abs(to_std(z)); }
template <class T> inline T arg(const complex<T>& z) { return std::arg(to_std(z)); }
template <class T> inline complex<T> polar(const T& r, const T& theta = T()) { return from_std(std::polar(r, theta)); }
template <class T, class U> inline auto pow(const complex<T>& a, const complex<U>& b) { return from_std(std::pow(to_std(a), to_std(b))); }
template <class T, class U> inline auto pow(const complex<T>& a, const U& b) { return from_std(std::pow(to_std(a), b)); }
template <class T, class U> inline auto pow(const T& a, const complex<U>& b) { return from_std(std::pow(a, to_std(b))); }
} // namespace thrust
