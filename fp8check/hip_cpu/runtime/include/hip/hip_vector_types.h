// HIP's vector types: structs of 1-4 named elements (.x .y .z .w) with element-wise arithmetic, and make_*.
#pragma once
struct char1 { char x; char1() = default; __host__ __device__ constexpr char1(char x_) : x(x_) {} };
__host__ __device__ constexpr inline char1 operator+(char1 a, char1 b) { return char1(a.x + b.x); }
__host__ __device__ constexpr inline char1 operator-(char1 a, char1 b) { return char1(a.x - b.x); }
__host__ __device__ constexpr inline char1 operator*(char1 a, char1 b) { return char1(a.x * b.x); }
__host__ __device__ constexpr inline char1 operator/(char1 a, char1 b) { return char1(a.x / b.x); }
__host__ __device__ constexpr inline char1 make_char1(char x) { return char1(x); }
struct char2 { char x; char y; char2() = default; __host__ __device__ constexpr char2(char x_, char y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline char2 operator+(char2 a, char2 b) { return char2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline char2 operator-(char2 a, char2 b) { return char2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline char2 operator*(char2 a, char2 b) { return char2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline char2 operator/(char2 a, char2 b) { return char2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline char2 make_char2(char x, char y) { return char2(x, y); }
struct char3 { char x; char y; char z; char3() = default; __host__ __device__ constexpr char3(char x_, char y_ = 0, char z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline char3 operator+(char3 a, char3 b) { return char3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline char3 operator-(char3 a, char3 b) { return char3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline char3 operator*(char3 a, char3 b) { return char3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline char3 operator/(char3 a, char3 b) { return char3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline char3 make_char3(char x, char y, char z) { return char3(x, y, z); }
struct char4 { char x; char y; char z; char w; char4() = default; __host__ __device__ constexpr char4(char x_, char y_ = 0, char z_ = 0, char w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline char4 operator+(char4 a, char4 b) { return char4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline char4 operator-(char4 a, char4 b) { return char4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline char4 operator*(char4 a, char4 b) { return char4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline char4 operator/(char4 a, char4 b) { return char4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline char4 make_char4(char x, char y, char z, char w) { return char4(x, y, z, w); }
struct uchar1 { unsigned char x; uchar1() = default; __host__ __device__ constexpr uchar1(unsigned char x_) : x(x_) {} };
__host__ __device__ constexpr inline uchar1 operator+(uchar1 a, uchar1 b) { return uchar1(a.x + b.x); }
__host__ __device__ constexpr inline uchar1 operator-(uchar1 a, uchar1 b) { return uchar1(a.x - b.x); }
__host__ __device__ constexpr inline uchar1 operator*(uchar1 a, uchar1 b) { return uchar1(a.x * b.x); }
__host__ __device__ constexpr inline uchar1 operator/(uchar1 a, uchar1 b) { return uchar1(a.x / b.x); }
__host__ __device__ constexpr inline uchar1 make_uchar1(unsigned char x) { return uchar1(x); }
struct uchar2 { unsigned char x; unsigned char y; uchar2() = default; __host__ __device__ constexpr uchar2(unsigned char x_, unsigned char y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline uchar2 operator+(uchar2 a, uchar2 b) { return uchar2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline uchar2 operator-(uchar2 a, uchar2 b) { return uchar2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline uchar2 operator*(uchar2 a, uchar2 b) { return uchar2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline uchar2 operator/(uchar2 a, uchar2 b) { return uchar2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline uchar2 make_uchar2(unsigned char x, unsigned char y) { return uchar2(x, y); }
struct uchar3 { unsigned char x; unsigned char y; unsigned char z; uchar3() = default; __host__ __device__ constexpr uchar3(unsigned char x_, unsigned char y_ = 0, unsigned char z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline uchar3 operator+(uchar3 a, uchar3 b) { return uchar3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline uchar3 operator-(uchar3 a, uchar3 b) { return uchar3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline uchar3 operator*(uchar3 a, uchar3 b) { return uchar3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline uchar3 operator/(uchar3 a, uchar3 b) { return uchar3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline uchar3 make_uchar3(unsigned char x, unsigned char y, unsigned char z) { return uchar3(x, y, z); }
struct uchar4 { unsigned char x; unsigned char y; unsigned char z; unsigned char w; uchar4() = default; __host__ __device__ constexpr uchar4(unsigned char x_, unsigned char y_ = 0, unsigned char z_ = 0, unsigned char w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline uchar4 operator+(uchar4 a, uchar4 b) { return uchar4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline uchar4 operator-(uchar4 a, uchar4 b) { return uchar4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline uchar4 operator*(uchar4 a, uchar4 b) { return uchar4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline uchar4 operator/(uchar4 a, uchar4 b) { return uchar4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { return uchar4(x, y, z, w); }
struct short1 { short x; short1() = default; __host__ __device__ constexpr short1(short x_) : x(x_) {} };
__host__ __device__ constexpr inline short1 operator+(short1 a, short1 b) { return short1(a.x + b.x); }
__host__ __device__ constexpr inline short1 operator-(short1 a, short1 b) { return short1(a.x - b.x); }
__host__ __device__ constexpr inline short1 operator*(short1 a, short1 b) { return short1(a.x * b.x); }
__host__ __device__ constexpr inline short1 operator/(short1 a, short1 b) { return short1(a.x / b.x); }
__host__ __device__ constexpr inline short1 make_short1(short x) { return short1(x); }
struct short2 { short x; short y; short2() = default; __host__ __device__ constexpr short2(short x_, short y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline short2 operator+(short2 a, short2 b) { return short2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline short2 operator-(short2 a, short2 b) { return short2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline short2 operator*(short2 a, short2 b) { return short2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline short2 operator/(short2 a, short2 b) { return short2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline short2 make_short2(short x, short y) { return short2(x, y); }
struct short3 { short x; short y; short z; short3() = default; __host__ __device__ constexpr short3(short x_, short y_ = 0, short z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline short3 operator+(short3 a, short3 b) { return short3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline short3 operator-(short3 a, short3 b) { return short3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline short3 operator*(short3 a, short3 b) { return short3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline short3 operator/(short3 a, short3 b) { return short3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline short3 make_short3(short x, short y, short z) { return short3(x, y, z); }
struct short4 { short x; short y; short z; short w; short4() = default; __host__ __device__ constexpr short4(short x_, short y_ = 0, short z_ = 0, short w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline short4 operator+(short4 a, short4 b) { return short4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline short4 operator-(short4 a, short4 b) { return short4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline short4 operator*(short4 a, short4 b) { return short4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline short4 operator/(short4 a, short4 b) { return short4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline short4 make_short4(short x, short y, short z, short w) { return short4(x, y, z, w); }
struct ushort1 { unsigned short x; ushort1() = default; __host__ __device__ constexpr ushort1(unsigned short x_) : x(x_) {} };
__host__ __device__ constexpr inline ushort1 operator+(ushort1 a, ushort1 b) { return ushort1(a.x + b.x); }
__host__ __device__ constexpr inline ushort1 operator-(ushort1 a, ushort1 b) { return ushort1(a.x - b.x); }
__host__ __device__ constexpr inline ushort1 operator*(ushort1 a, ushort1 b) { return ushort1(a.x * b.x); }
__host__ __device__ constexpr inline ushort1 operator/(ushort1 a, ushort1 b) { return ushort1(a.x / b.x); }
__host__ __device__ constexpr inline ushort1 make_ushort1(unsigned short x) { return ushort1(x); }
struct ushort2 { unsigned short x; unsigned short y; ushort2() = default; __host__ __device__ constexpr ushort2(unsigned short x_, unsigned short y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline ushort2 operator+(ushort2 a, ushort2 b) { return ushort2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline ushort2 operator-(ushort2 a, ushort2 b) { return ushort2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline ushort2 operator*(ushort2 a, ushort2 b) { return ushort2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline ushort2 operator/(ushort2 a, ushort2 b) { return ushort2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline ushort2 make_ushort2(unsigned short x, unsigned short y) { return ushort2(x, y); }
struct ushort3 { unsigned short x; unsigned short y; unsigned short z; ushort3() = default; __host__ __device__ constexpr ushort3(unsigned short x_, unsigned short y_ = 0, unsigned short z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline ushort3 operator+(ushort3 a, ushort3 b) { return ushort3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline ushort3 operator-(ushort3 a, ushort3 b) { return ushort3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline ushort3 operator*(ushort3 a, ushort3 b) { return ushort3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline ushort3 operator/(ushort3 a, ushort3 b) { return ushort3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline ushort3 make_ushort3(unsigned short x, unsigned short y, unsigned short z) { return ushort3(x, y, z); }
struct ushort4 { unsigned short x; unsigned short y; unsigned short z; unsigned short w; ushort4() = default; __host__ __device__ constexpr ushort4(unsigned short x_, unsigned short y_ = 0, unsigned short z_ = 0, unsigned short w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline ushort4 operator+(ushort4 a, ushort4 b) { return ushort4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline ushort4 operator-(ushort4 a, ushort4 b) { return ushort4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline ushort4 operator*(ushort4 a, ushort4 b) { return ushort4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline ushort4 operator/(ushort4 a, ushort4 b) { return ushort4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline ushort4 make_ushort4(unsigned short x, unsigned short y, unsigned short z, unsigned short w) { return ushort4(x, y, z, w); }
struct int1 { int x; int1() = default; __host__ __device__ constexpr int1(int x_) : x(x_) {} };
__host__ __device__ constexpr inline int1 operator+(int1 a, int1 b) { return int1(a.x + b.x); }
__host__ __device__ constexpr inline int1 operator-(int1 a, int1 b) { return int1(a.x - b.x); }
__host__ __device__ constexpr inline int1 operator*(int1 a, int1 b) { return int1(a.x * b.x); }
__host__ __device__ constexpr inline int1 operator/(int1 a, int1 b) { return int1(a.x / b.x); }
__host__ __device__ constexpr inline int1 make_int1(int x) { return int1(x); }
struct int2 { int x; int y; int2() = default; __host__ __device__ constexpr int2(int x_, int y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline int2 operator+(int2 a, int2 b) { return int2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline int2 operator-(int2 a, int2 b) { return int2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline int2 operator*(int2 a, int2 b) { return int2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline int2 operator/(int2 a, int2 b) { return int2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline int2 make_int2(int x, int y) { return int2(x, y); }
struct int3 { int x; int y; int z; int3() = default; __host__ __device__ constexpr int3(int x_, int y_ = 0, int z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline int3 operator+(int3 a, int3 b) { return int3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline int3 operator-(int3 a, int3 b) { return int3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline int3 operator*(int3 a, int3 b) { return int3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline int3 operator/(int3 a, int3 b) { return int3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline int3 make_int3(int x, int y, int z) { return int3(x, y, z); }
struct int4 { int x; int y; int z; int w; int4() = default; __host__ __device__ constexpr int4(int x_, int y_ = 0, int z_ = 0, int w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline int4 operator+(int4 a, int4 b) { return int4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline int4 operator-(int4 a, int4 b) { return int4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline int4 operator*(int4 a, int4 b) { return int4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline int4 operator/(int4 a, int4 b) { return int4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline int4 make_int4(int x, int y, int z, int w) { return int4(x, y, z, w); }
struct uint1 { unsigned int x; uint1() = default; __host__ __device__ constexpr uint1(unsigned int x_) : x(x_) {} };
__host__ __device__ constexpr inline uint1 operator+(uint1 a, uint1 b) { return uint1(a.x + b.x); }
__host__ __device__ constexpr inline uint1 operator-(uint1 a, uint1 b) { return uint1(a.x - b.x); }
__host__ __device__ constexpr inline uint1 operator*(uint1 a, uint1 b) { return uint1(a.x * b.x); }
__host__ __device__ constexpr inline uint1 operator/(uint1 a, uint1 b) { return uint1(a.x / b.x); }
__host__ __device__ constexpr inline uint1 make_uint1(unsigned int x) { return uint1(x); }
struct uint2 { unsigned int x; unsigned int y; uint2() = default; __host__ __device__ constexpr uint2(unsigned int x_, unsigned int y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline uint2 operator+(uint2 a, uint2 b) { return uint2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline uint2 operator-(uint2 a, uint2 b) { return uint2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline uint2 operator*(uint2 a, uint2 b) { return uint2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline uint2 operator/(uint2 a, uint2 b) { return uint2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2(x, y); }
struct uint3 { unsigned int x; unsigned int y; unsigned int z; uint3() = default; __host__ __device__ constexpr uint3(unsigned int x_, unsigned int y_ = 0, unsigned int z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline uint3 operator+(uint3 a, uint3 b) { return uint3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline uint3 operator-(uint3 a, uint3 b) { return uint3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline uint3 operator*(uint3 a, uint3 b) { return uint3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline uint3 operator/(uint3 a, uint3 b) { return uint3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3(x, y, z); }
struct uint4 { unsigned int x; unsigned int y; unsigned int z; unsigned int w; uint4() = default; __host__ __device__ constexpr uint4(unsigned int x_, unsigned int y_ = 0, unsigned int z_ = 0, unsigned int w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline uint4 operator+(uint4 a, uint4 b) { return uint4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline uint4 operator-(uint4 a, uint4 b) { return uint4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline uint4 operator*(uint4 a, uint4 b) { return uint4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline uint4 operator/(uint4 a, uint4 b) { return uint4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { return uint4(x, y, z, w); }
struct long1 { long x; long1() = default; __host__ __device__ constexpr long1(long x_) : x(x_) {} };
__host__ __device__ constexpr inline long1 operator+(long1 a, long1 b) { return long1(a.x + b.x); }
__host__ __device__ constexpr inline long1 operator-(long1 a, long1 b) { return long1(a.x - b.x); }
__host__ __device__ constexpr inline long1 operator*(long1 a, long1 b) { return long1(a.x * b.x); }
__host__ __device__ constexpr inline long1 operator/(long1 a, long1 b) { return long1(a.x / b.x); }
__host__ __device__ constexpr inline long1 make_long1(long x) { return long1(x); }
struct long2 { long x; long y; long2() = default; __host__ __device__ constexpr long2(long x_, long y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline long2 operator+(long2 a, long2 b) { return long2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline long2 operator-(long2 a, long2 b) { return long2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline long2 operator*(long2 a, long2 b) { return long2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline long2 operator/(long2 a, long2 b) { return long2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline long2 make_long2(long x, long y) { return long2(x, y); }
struct long3 { long x; long y; long z; long3() = default; __host__ __device__ constexpr long3(long x_, long y_ = 0, long z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline long3 operator+(long3 a, long3 b) { return long3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline long3 operator-(long3 a, long3 b) { return long3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline long3 operator*(long3 a, long3 b) { return long3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline long3 operator/(long3 a, long3 b) { return long3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline long3 make_long3(long x, long y, long z) { return long3(x, y, z); }
struct long4 { long x; long y; long z; long w; long4() = default; __host__ __device__ constexpr long4(long x_, long y_ = 0, long z_ = 0, long w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline long4 operator+(long4 a, long4 b) { return long4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline long4 operator-(long4 a, long4 b) { return long4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline long4 operator*(long4 a, long4 b) { return long4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline long4 operator/(long4 a, long4 b) { return long4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline long4 make_long4(long x, long y, long z, long w) { return long4(x, y, z, w); }
struct ulong1 { unsigned long x; ulong1() = default; __host__ __device__ constexpr ulong1(unsigned long x_) : x(x_) {} };
__host__ __device__ constexpr inline ulong1 operator+(ulong1 a, ulong1 b) { return ulong1(a.x + b.x); }
__host__ __device__ constexpr inline ulong1 operator-(ulong1 a, ulong1 b) { return ulong1(a.x - b.x); }
__host__ __device__ constexpr inline ulong1 operator*(ulong1 a, ulong1 b) { return ulong1(a.x * b.x); }
__host__ __device__ constexpr inline ulong1 operator/(ulong1 a, ulong1 b) { return ulong1(a.x / b.x); }
__host__ __device__ constexpr inline ulong1 make_ulong1(unsigned long x) { return ulong1(x); }
struct ulong2 { unsigned long x; unsigned long y; ulong2() = default; __host__ __device__ constexpr ulong2(unsigned long x_, unsigned long y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline ulong2 operator+(ulong2 a, ulong2 b) { return ulong2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline ulong2 operator-(ulong2 a, ulong2 b) { return ulong2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline ulong2 operator*(ulong2 a, ulong2 b) { return ulong2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline ulong2 operator/(ulong2 a, ulong2 b) { return ulong2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline ulong2 make_ulong2(unsigned long x, unsigned long y) { return ulong2(x, y); }
struct ulong3 { unsigned long x; unsigned long y; unsigned long z; ulong3() = default; __host__ __device__ constexpr ulong3(unsigned long x_, unsigned long y_ = 0, unsigned long z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline ulong3 operator+(ulong3 a, ulong3 b) { return ulong3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline ulong3 operator-(ulong3 a, ulong3 b) { return ulong3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline ulong3 operator*(ulong3 a, ulong3 b) { return ulong3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline ulong3 operator/(ulong3 a, ulong3 b) { return ulong3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline ulong3 make_ulong3(unsigned long x, unsigned long y, unsigned long z) { return ulong3(x, y, z); }
struct ulong4 { unsigned long x; unsigned long y; unsigned long z; unsigned long w; ulong4() = default; __host__ __device__ constexpr ulong4(unsigned long x_, unsigned long y_ = 0, unsigned long z_ = 0, unsigned long w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline ulong4 operator+(ulong4 a, ulong4 b) { return ulong4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline ulong4 operator-(ulong4 a, ulong4 b) { return ulong4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline ulong4 operator*(ulong4 a, ulong4 b) { return ulong4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline ulong4 operator/(ulong4 a, ulong4 b) { return ulong4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline ulong4 make_ulong4(unsigned long x, unsigned long y, unsigned long z, unsigned long w) { return ulong4(x, y, z, w); }
struct longlong1 { long long x; longlong1() = default; __host__ __device__ constexpr longlong1(long long x_) : x(x_) {} };
__host__ __device__ constexpr inline longlong1 operator+(longlong1 a, longlong1 b) { return longlong1(a.x + b.x); }
__host__ __device__ constexpr inline longlong1 operator-(longlong1 a, longlong1 b) { return longlong1(a.x - b.x); }
__host__ __device__ constexpr inline longlong1 operator*(longlong1 a, longlong1 b) { return longlong1(a.x * b.x); }
__host__ __device__ constexpr inline longlong1 operator/(longlong1 a, longlong1 b) { return longlong1(a.x / b.x); }
__host__ __device__ constexpr inline longlong1 make_longlong1(long long x) { return longlong1(x); }
struct longlong2 { long long x; long long y; longlong2() = default; __host__ __device__ constexpr longlong2(long long x_, long long y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline longlong2 operator+(longlong2 a, longlong2 b) { return longlong2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline longlong2 operator-(longlong2 a, longlong2 b) { return longlong2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline longlong2 operator*(longlong2 a, longlong2 b) { return longlong2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline longlong2 operator/(longlong2 a, longlong2 b) { return longlong2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline longlong2 make_longlong2(long long x, long long y) { return longlong2(x, y); }
struct longlong3 { long long x; long long y; long long z; longlong3() = default; __host__ __device__ constexpr longlong3(long long x_, long long y_ = 0, long long z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline longlong3 operator+(longlong3 a, longlong3 b) { return longlong3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline longlong3 operator-(longlong3 a, longlong3 b) { return longlong3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline longlong3 operator*(longlong3 a, longlong3 b) { return longlong3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline longlong3 operator/(longlong3 a, longlong3 b) { return longlong3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline longlong3 make_longlong3(long long x, long long y, long long z) { return longlong3(x, y, z); }
struct longlong4 { long long x; long long y; long long z; long long w; longlong4() = default; __host__ __device__ constexpr longlong4(long long x_, long long y_ = 0, long long z_ = 0, long long w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline longlong4 operator+(longlong4 a, longlong4 b) { return longlong4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline longlong4 operator-(longlong4 a, longlong4 b) { return longlong4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline longlong4 operator*(longlong4 a, longlong4 b) { return longlong4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline longlong4 operator/(longlong4 a, longlong4 b) { return longlong4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline longlong4 make_longlong4(long long x, long long y, long long z, long long w) { return longlong4(x, y, z, w); }
struct ulonglong1 { unsigned long long x; ulonglong1() = default; __host__ __device__ constexpr ulonglong1(unsigned long long x_) : x(x_) {} };
__host__ __device__ constexpr inline ulonglong1 operator+(ulonglong1 a, ulonglong1 b) { return ulonglong1(a.x + b.x); }
__host__ __device__ constexpr inline ulonglong1 operator-(ulonglong1 a, ulonglong1 b) { return ulonglong1(a.x - b.x); }
__host__ __device__ constexpr inline ulonglong1 operator*(ulonglong1 a, ulonglong1 b) { return ulonglong1(a.x * b.x); }
__host__ __device__ constexpr inline ulonglong1 operator/(ulonglong1 a, ulonglong1 b) { return ulonglong1(a.x / b.x); }
__host__ __device__ constexpr inline ulonglong1 make_ulonglong1(unsigned long long x) { return ulonglong1(x); }
struct ulonglong2 { unsigned long long x; unsigned long long y; ulonglong2() = default; __host__ __device__ constexpr ulonglong2(unsigned long long x_, unsigned long long y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline ulonglong2 operator+(ulonglong2 a, ulonglong2 b) { return ulonglong2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline ulonglong2 operator-(ulonglong2 a, ulonglong2 b) { return ulonglong2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline ulonglong2 operator*(ulonglong2 a, ulonglong2 b) { return ulonglong2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline ulonglong2 operator/(ulonglong2 a, ulonglong2 b) { return ulonglong2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { return ulonglong2(x, y); }
struct ulonglong3 { unsigned long long x; unsigned long long y; unsigned long long z; ulonglong3() = default; __host__ __device__ constexpr ulonglong3(unsigned long long x_, unsigned long long y_ = 0, unsigned long long z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline ulonglong3 operator+(ulonglong3 a, ulonglong3 b) { return ulonglong3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline ulonglong3 operator-(ulonglong3 a, ulonglong3 b) { return ulonglong3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline ulonglong3 operator*(ulonglong3 a, ulonglong3 b) { return ulonglong3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline ulonglong3 operator/(ulonglong3 a, ulonglong3 b) { return ulonglong3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline ulonglong3 make_ulonglong3(unsigned long long x, unsigned long long y, unsigned long long z) { return ulonglong3(x, y, z); }
struct ulonglong4 { unsigned long long x; unsigned long long y; unsigned long long z; unsigned long long w; ulonglong4() = default; __host__ __device__ constexpr ulonglong4(unsigned long long x_, unsigned long long y_ = 0, unsigned long long z_ = 0, unsigned long long w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline ulonglong4 operator+(ulonglong4 a, ulonglong4 b) { return ulonglong4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline ulonglong4 operator-(ulonglong4 a, ulonglong4 b) { return ulonglong4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline ulonglong4 operator*(ulonglong4 a, ulonglong4 b) { return ulonglong4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline ulonglong4 operator/(ulonglong4 a, ulonglong4 b) { return ulonglong4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline ulonglong4 make_ulonglong4(unsigned long long x, unsigned long long y, unsigned long long z, unsigned long long w) { return ulonglong4(x, y, z, w); }
struct float1 { float x; float1() = default; __host__ __device__ constexpr float1(float x_) : x(x_) {} };
__host__ __device__ constexpr inline float1 operator+(float1 a, float1 b) { return float1(a.x + b.x); }
__host__ __device__ constexpr inline float1 operator-(float1 a, float1 b) { return float1(a.x - b.x); }
__host__ __device__ constexpr inline float1 operator*(float1 a, float1 b) { return float1(a.x * b.x); }
__host__ __device__ constexpr inline float1 operator/(float1 a, float1 b) { return float1(a.x / b.x); }
__host__ __device__ constexpr inline float1 make_float1(float x) { return float1(x); }
struct float2 { float x; float y; float2() = default; __host__ __device__ constexpr float2(float x_, float y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline float2 operator+(float2 a, float2 b) { return float2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline float2 operator-(float2 a, float2 b) { return float2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline float2 operator*(float2 a, float2 b) { return float2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline float2 operator/(float2 a, float2 b) { return float2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline float2 make_float2(float x, float y) { return float2(x, y); }
struct float3 { float x; float y; float z; float3() = default; __host__ __device__ constexpr float3(float x_, float y_ = 0, float z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline float3 operator+(float3 a, float3 b) { return float3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline float3 operator-(float3 a, float3 b) { return float3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline float3 operator*(float3 a, float3 b) { return float3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline float3 operator/(float3 a, float3 b) { return float3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline float3 make_float3(float x, float y, float z) { return float3(x, y, z); }
struct float4 { float x; float y; float z; float w; float4() = default; __host__ __device__ constexpr float4(float x_, float y_ = 0, float z_ = 0, float w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline float4 operator+(float4 a, float4 b) { return float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline float4 operator-(float4 a, float4 b) { return float4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline float4 operator*(float4 a, float4 b) { return float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline float4 operator/(float4 a, float4 b) { return float4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline float4 make_float4(float x, float y, float z, float w) { return float4(x, y, z, w); }
struct double1 { double x; double1() = default; __host__ __device__ constexpr double1(double x_) : x(x_) {} };
__host__ __device__ constexpr inline double1 operator+(double1 a, double1 b) { return double1(a.x + b.x); }
__host__ __device__ constexpr inline double1 operator-(double1 a, double1 b) { return double1(a.x - b.x); }
__host__ __device__ constexpr inline double1 operator*(double1 a, double1 b) { return double1(a.x * b.x); }
__host__ __device__ constexpr inline double1 operator/(double1 a, double1 b) { return double1(a.x / b.x); }
__host__ __device__ constexpr inline double1 make_double1(double x) { return double1(x); }
struct double2 { double x; double y; double2() = default; __host__ __device__ constexpr double2(double x_, double y_ = 0) : x(x_), y(y_) {} };
__host__ __device__ constexpr inline double2 operator+(double2 a, double2 b) { return double2(a.x + b.x, a.y + b.y); }
__host__ __device__ constexpr inline double2 operator-(double2 a, double2 b) { return double2(a.x - b.x, a.y - b.y); }
__host__ __device__ constexpr inline double2 operator*(double2 a, double2 b) { return double2(a.x * b.x, a.y * b.y); }
__host__ __device__ constexpr inline double2 operator/(double2 a, double2 b) { return double2(a.x / b.x, a.y / b.y); }
__host__ __device__ constexpr inline double2 make_double2(double x, double y) { return double2(x, y); }
struct double3 { double x; double y; double z; double3() = default; __host__ __device__ constexpr double3(double x_, double y_ = 0, double z_ = 0) : x(x_), y(y_), z(z_) {} };
__host__ __device__ constexpr inline double3 operator+(double3 a, double3 b) { return double3(a.x + b.x, a.y + b.y, a.z + b.z); }
__host__ __device__ constexpr inline double3 operator-(double3 a, double3 b) { return double3(a.x - b.x, a.y - b.y, a.z - b.z); }
__host__ __device__ constexpr inline double3 operator*(double3 a, double3 b) { return double3(a.x * b.x, a.y * b.y, a.z * b.z); }
__host__ __device__ constexpr inline double3 operator/(double3 a, double3 b) { return double3(a.x / b.x, a.y / b.y, a.z / b.z); }
__host__ __device__ constexpr inline double3 make_double3(double x, double y, double z) { return double3(x, y, z); }
struct double4 { double x; double y; double z; double w; double4() = default; __host__ __device__ constexpr double4(double x_, double y_ = 0, double z_ = 0, double w_ = 0) : x(x_), y(y_), z(z_), w(w_) {} };
__host__ __device__ constexpr inline double4 operator+(double4 a, double4 b) { return double4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__host__ __device__ constexpr inline double4 operator-(double4 a, double4 b) { return double4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__host__ __device__ constexpr inline double4 operator*(double4 a, double4 b) { return double4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__host__ __device__ constexpr inline double4 operator/(double4 a, double4 b) { return double4(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); }
__host__ __device__ constexpr inline double4 make_double4(double x, double y, double z, double w) { return double4(x, y, z, w); }
