/*
 * gputest.h - what the gpu tests share: device 0 when there is one, and a clean skip when not.
 */
#ifndef GPUTEST_H
#define GPUTEST_H

#include "gpu.h"
#include "testutil.h"

static int g_dev = -1;

/* cmocka group setup: finds a device (none is not an error) */
static int gpu_setup(void **state) {
    (void)state;
    int n = 0;
    dp_err err = {0};
    if (gpu_device_count(&n, &err) == DP_OK && n > 0) g_dev = 0;
    return 0;
}

#define SKIP_WITHOUT_GPU()                                                                                             \
    do {                                                                                                               \
        if (g_dev < 0) {                                                                                               \
            print_message("[  SKIPPED ] no CUDA device on this machine\n");                                            \
            skip();                                                                                                    \
        }                                                                                                              \
    } while (0)

#endif /* GPUTEST_H */
