// common.cuh - error checking shared by the CUDA sources.
#pragma once

#include <cuda_runtime.h>

#include "status.h"

// Returns a dp_status naming the call site on a CUDA error.
#define GPU_CHECK(call)                                                                         \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess)                                                                  \
            return dp_err_set(err, e_ == cudaErrorMemoryAllocation ? DP_ENOMEM : DP_EIO,        \
                              "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
    } while (0)
