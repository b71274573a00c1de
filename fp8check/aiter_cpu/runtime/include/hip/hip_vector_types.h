// HIP's vector types as clang extended vectors (.x .y .z .w, element-wise arithmetic) and make_*.
#pragma once
typedef char char1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline char1 make_char1(char a0) { return char1{a0}; }
typedef char char2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline char2 make_char2(char a0, char a1) { return char2{a0, a1}; }
typedef char char3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline char3 make_char3(char a0, char a1, char a2) { return char3{a0, a1, a2}; }
typedef char char4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline char4 make_char4(char a0, char a1, char a2, char a3) { return char4{a0, a1, a2, a3}; }
typedef unsigned char uchar1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline uchar1 make_uchar1(unsigned char a0) { return uchar1{a0}; }
typedef unsigned char uchar2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline uchar2 make_uchar2(unsigned char a0, unsigned char a1) { return uchar2{a0, a1}; }
typedef unsigned char uchar3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline uchar3 make_uchar3(unsigned char a0, unsigned char a1, unsigned char a2) { return uchar3{a0, a1, a2}; }
typedef unsigned char uchar4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline uchar4 make_uchar4(unsigned char a0, unsigned char a1, unsigned char a2, unsigned char a3) { return uchar4{a0, a1, a2, a3}; }
typedef short short1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline short1 make_short1(short a0) { return short1{a0}; }
typedef short short2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline short2 make_short2(short a0, short a1) { return short2{a0, a1}; }
typedef short short3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline short3 make_short3(short a0, short a1, short a2) { return short3{a0, a1, a2}; }
typedef short short4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline short4 make_short4(short a0, short a1, short a2, short a3) { return short4{a0, a1, a2, a3}; }
typedef unsigned short ushort1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline ushort1 make_ushort1(unsigned short a0) { return ushort1{a0}; }
typedef unsigned short ushort2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline ushort2 make_ushort2(unsigned short a0, unsigned short a1) { return ushort2{a0, a1}; }
typedef unsigned short ushort3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline ushort3 make_ushort3(unsigned short a0, unsigned short a1, unsigned short a2) { return ushort3{a0, a1, a2}; }
typedef unsigned short ushort4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline ushort4 make_ushort4(unsigned short a0, unsigned short a1, unsigned short a2, unsigned short a3) { return ushort4{a0, a1, a2, a3}; }
typedef int int1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline int1 make_int1(int a0) { return int1{a0}; }
typedef int int2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline int2 make_int2(int a0, int a1) { return int2{a0, a1}; }
typedef int int3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline int3 make_int3(int a0, int a1, int a2) { return int3{a0, a1, a2}; }
typedef int int4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline int4 make_int4(int a0, int a1, int a2, int a3) { return int4{a0, a1, a2, a3}; }
typedef unsigned int uint1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline uint1 make_uint1(unsigned int a0) { return uint1{a0}; }
typedef unsigned int uint2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline uint2 make_uint2(unsigned int a0, unsigned int a1) { return uint2{a0, a1}; }
typedef unsigned int uint3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline uint3 make_uint3(unsigned int a0, unsigned int a1, unsigned int a2) { return uint3{a0, a1, a2}; }
typedef unsigned int uint4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline uint4 make_uint4(unsigned int a0, unsigned int a1, unsigned int a2, unsigned int a3) { return uint4{a0, a1, a2, a3}; }
typedef long long1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline long1 make_long1(long a0) { return long1{a0}; }
typedef long long2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline long2 make_long2(long a0, long a1) { return long2{a0, a1}; }
typedef long long3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline long3 make_long3(long a0, long a1, long a2) { return long3{a0, a1, a2}; }
typedef long long4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline long4 make_long4(long a0, long a1, long a2, long a3) { return long4{a0, a1, a2, a3}; }
typedef unsigned long ulong1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline ulong1 make_ulong1(unsigned long a0) { return ulong1{a0}; }
typedef unsigned long ulong2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline ulong2 make_ulong2(unsigned long a0, unsigned long a1) { return ulong2{a0, a1}; }
typedef unsigned long ulong3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline ulong3 make_ulong3(unsigned long a0, unsigned long a1, unsigned long a2) { return ulong3{a0, a1, a2}; }
typedef unsigned long ulong4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline ulong4 make_ulong4(unsigned long a0, unsigned long a1, unsigned long a2, unsigned long a3) { return ulong4{a0, a1, a2, a3}; }
typedef long long longlong1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline longlong1 make_longlong1(long long a0) { return longlong1{a0}; }
typedef long long longlong2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline longlong2 make_longlong2(long long a0, long long a1) { return longlong2{a0, a1}; }
typedef long long longlong3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline longlong3 make_longlong3(long long a0, long long a1, long long a2) { return longlong3{a0, a1, a2}; }
typedef long long longlong4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline longlong4 make_longlong4(long long a0, long long a1, long long a2, long long a3) { return longlong4{a0, a1, a2, a3}; }
typedef unsigned long long ulonglong1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline ulonglong1 make_ulonglong1(unsigned long long a0) { return ulonglong1{a0}; }
typedef unsigned long long ulonglong2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline ulonglong2 make_ulonglong2(unsigned long long a0, unsigned long long a1) { return ulonglong2{a0, a1}; }
typedef unsigned long long ulonglong3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline ulonglong3 make_ulonglong3(unsigned long long a0, unsigned long long a1, unsigned long long a2) { return ulonglong3{a0, a1, a2}; }
typedef unsigned long long ulonglong4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline ulonglong4 make_ulonglong4(unsigned long long a0, unsigned long long a1, unsigned long long a2, unsigned long long a3) { return ulonglong4{a0, a1, a2, a3}; }
typedef float float1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline float1 make_float1(float a0) { return float1{a0}; }
typedef float float2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline float2 make_float2(float a0, float a1) { return float2{a0, a1}; }
typedef float float3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline float3 make_float3(float a0, float a1, float a2) { return float3{a0, a1, a2}; }
typedef float float4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline float4 make_float4(float a0, float a1, float a2, float a3) { return float4{a0, a1, a2, a3}; }
typedef double double1 __attribute__((ext_vector_type(1)));
__host__ __device__ inline double1 make_double1(double a0) { return double1{a0}; }
typedef double double2 __attribute__((ext_vector_type(2)));
__host__ __device__ inline double2 make_double2(double a0, double a1) { return double2{a0, a1}; }
typedef double double3 __attribute__((ext_vector_type(3)));
__host__ __device__ inline double3 make_double3(double a0, double a1, double a2) { return double3{a0, a1, a2}; }
typedef double double4 __attribute__((ext_vector_type(4)));
__host__ __device__ inline double4 make_double4(double a0, double a1, double a2, double a3) { return double4{a0, a1, a2, a3}; }
