#pragma once
#include <stdint.h>
typedef unsigned char __hip_fp8_storage_t;
