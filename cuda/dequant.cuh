// dequant.cuh - device dequantization of the weight formats (one thread per 32 elements).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "status.h"

// Launches dequantization of n elements of `type` from device src to device dst on stream.
dp_status gpu_dequantize(int type, const void *src, float *dst, int64_t n, cudaStream_t stream, dp_err *err);
