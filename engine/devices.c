/*
 * devices.c - the device registry: the one place in the engine that knows which device
 * backends beside the CPU exist in this build.
 *
 * DESIGN
 * - A device backend lives in its own library (cuda/ for CUDA) that depends on the engine, never
 *   the other way round. It registers itself from a static initializer; the build links that
 *   library whole (CMake target dp_engine_devices), so the initializer runs before main() even
 *   though nothing calls into the library by name.
 * - Registration happens before main() on one thread, and the table only grows then; readers
 *   afterwards need no lock.
 * - A device kind without a registered backend is a build without it: the context's error says
 *   so instead of failing later.
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "engine.h"

#define MAX_DEVICE_BACKENDS 4

static const eng_device_backend *g_backends[MAX_DEVICE_BACKENDS];
static int g_n_backends;

bool eng_device_register(const eng_device_backend *b) {
    if (!b || b->device == DP_DEVICE_CPU || b->device == DP_DEVICE_AUTO) return false;
    for (int i = 0; i < g_n_backends; i++)
        if (g_backends[i]->device == b->device) return false;
    if (g_n_backends == MAX_DEVICE_BACKENDS) return false;
    g_backends[g_n_backends++] = b;
    return true;
}

const eng_device_backend *eng_device_backend_for(dp_device device) {
    if (device == DP_DEVICE_CPU) return NULL;
    for (int i = 0; i < g_n_backends; i++)
        if (device == DP_DEVICE_AUTO || g_backends[i]->device == device) return g_backends[i];
    return NULL;
}

void eng_device_query(dp_device device, eng_device_report *out) {
    memset(out, 0, sizeof(*out));
    const eng_device_backend *b = eng_device_backend_for(device);
    if (!b) return;
    out->built = true;
    snprintf(out->backend, sizeof(out->backend), "%s", b->name);
    size_t free_b = 0;
    b->probe(&out->n_devices, &free_b, out->name, sizeof(out->name));
    out->free_bytes = free_b;
}
