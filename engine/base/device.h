/*
 * device.h - where a model runs: the one encoding of the device setting, shared by the engine
 * (eng_context_params), the job file (model.device) and the command lines (--device).
 */
#ifndef DP_DEVICE_H
#define DP_DEVICE_H

#include <stdbool.h>
#include <string.h>

typedef enum dp_device {
    DP_DEVICE_CPU = 0,
    DP_DEVICE_CUDA = 1,
    DP_DEVICE_AUTO = 2, /* CUDA when a GPU is present, else CPU */
} dp_device;

/* "cpu", "cuda" or "auto"; false for anything else. */
static inline bool dp_device_parse(const char *s, dp_device *out) {
    if (!s) return false;
    if (!strcmp(s, "cpu")) *out = DP_DEVICE_CPU;
    else if (!strcmp(s, "cuda")) *out = DP_DEVICE_CUDA;
    else if (!strcmp(s, "auto")) *out = DP_DEVICE_AUTO;
    else return false;
    return true;
}

/* The setting's name as dp_device_parse reads it. */
static inline const char *dp_device_name(dp_device d) {
    return d == DP_DEVICE_CPU ? "cpu" : d == DP_DEVICE_CUDA ? "cuda" : "auto";
}

#endif /* DP_DEVICE_H */
