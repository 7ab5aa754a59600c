// device.cu - CUDA device discovery.
//
// DESIGN: a machine without a driver or GPU is normal (CPU fallback), so "no device" is a
// count of 0 with DP_OK, never an error.
#include <stdio.h>
#include <string.h>

#include "common.cuh"
#include "gpu.h"

extern "C" dp_status gpu_device_count(int *n, dp_err *err) {
    *n = 0;
    int c = 0;
    cudaError_t e = cudaGetDeviceCount(&c);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        cudaGetLastError(); // clear the sticky state
        return DP_OK;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return DP_OK; // an unusable driver is the same as no GPU for the fallback
    }
    *n = c;
    (void)err;
    return DP_OK;
}

extern "C" dp_status gpu_device_get_info(int index, gpu_device_info *info, dp_err *err) {
    cudaDeviceProp p;
    GPU_CHECK(cudaGetDeviceProperties(&p, index));
    memset(info, 0, sizeof(*info));
    info->index = index;
    snprintf(info->name, sizeof(info->name), "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->n_sm = p.multiProcessorCount;
    GPU_CHECK(cudaSetDevice(index));
    GPU_CHECK(cudaMemGetInfo(&info->mem_free, &info->mem_total));
    return DP_OK;
}
