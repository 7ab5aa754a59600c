// emu.cpp - the CUDA emulator behind emu.h: fibers for a block's threads, barriers for
// __syncthreads, __syncwarp and the warp shuffles, host memory for the device.
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>

#include <vector>

extern "C" {
#include "quant.h"
}

// ---- fibers ------------------------------------------------------------------------------
// x86-64: a six-register switch (no signal mask syscall, unlike swapcontext), which keeps the
// millions of barrier yields of an attention kernel cheap. Elsewhere: ucontext.

enum { RUN, WAIT_BLOCK, WAIT_WARP, DONE };
enum { STACK_BYTES = 128 * 1024, MAX_THREADS = 1024 };

#if defined(__x86_64__)
extern "C" void emu_switch(void **save_sp, void *new_sp);
asm(".text\n"
    ".globl emu_switch\n"
    ".type emu_switch,@function\n"
    "emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size emu_switch, .-emu_switch\n");
#else
#include <ucontext.h>
#endif

struct fiber {
    uint3 tid;
    int state;
    int n_shfl; // shuffles done: selects the slot bank, so one barrier per shuffle suffices
    int n_mma;  // the same for emu_mma's buffer
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t ctx;
#endif
};

static std::vector<fiber> g_fib;
static std::vector<char *> g_stacks;
static int g_cur, g_n;
static const std::function<void()> *g_kernel;
static float g_slot[2][MAX_THREADS];
#if defined(__x86_64__)
static void *g_sched_sp;
#else
static ucontext_t g_sched;
#endif

uint3 emu_block_idx;
dim3 emu_block_dim, emu_grid_dim;

const uint3 &emu_thread_idx() { return g_fib[g_cur].tid; }

static void yield_to_scheduler() {
#if defined(__x86_64__)
    emu_switch(&g_fib[g_cur].sp, g_sched_sp);
#else
    swapcontext(&g_fib[g_cur].ctx, &g_sched);
#endif
}

static void fiber_entry() {
    (*g_kernel)();
    g_fib[g_cur].state = DONE;
    yield_to_scheduler(); // never resumed
    abort();
}

static void fiber_start(int i) {
    fiber *f = &g_fib[i];
    char *stack = g_stacks[i];
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)(stack + STACK_BYTES)) & ~(uintptr_t)15;
    void **sp = (void **)(top - 8); // entry sees rsp % 16 == 8, as after a call
    *--sp = (void *)fiber_entry;    // emu_switch's ret
    for (int r = 0; r < 6; r++) *--sp = NULL; // rbp rbx r12 r13 r14 r15
    f->sp = sp;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = stack;
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = &g_sched;
    makecontext(&f->ctx, fiber_entry, 0);
#endif
}

static void resume(int i) {
    g_cur = i;
#if defined(__x86_64__)
    emu_switch(&g_sched_sp, g_fib[i].sp);
#else
    swapcontext(&g_sched, &g_fib[i].ctx);
#endif
}

const void *emu_aligned(const void *p, size_t align) {
    if ((uintptr_t)p % align) {
        fprintf(stderr, "cuda emulator: a %zu-byte vector load from %p, which is not %zu-byte aligned (a fault on a "
                        "GPU)\n", align, p, align);
        abort();
    }
    return p;
}

void __syncthreads() {
    g_fib[g_cur].state = WAIT_BLOCK;
    yield_to_scheduler();
}

float emu_shfl_xor(float v, int lane_mask) {
    fiber *f = &g_fib[g_cur];
    const int bank = f->n_shfl++ & 1, me = g_cur, warp0 = me & ~31, lane = me & 31;
    g_slot[bank][me] = v;
    f->state = WAIT_WARP;
    yield_to_scheduler();
    const int src = warp0 + (lane ^ lane_mask);
    return src < g_n ? g_slot[bank][src] : v;
}

// Runs the block's fibers until all are done, releasing a barrier once every live thread of
// its scope waits at it.
static void run_block() {
    for (;;) {
        bool ran = false;
        for (int i = 0; i < g_n; i++)
            if (g_fib[i].state == RUN) {
                resume(i);
                ran = true;
            }
        if (ran) continue;
        int live = 0, at_block = 0;
        bool released = false;
        for (int w0 = 0; w0 < g_n; w0 += 32) {
            int wl = 0, at_warp = 0;
            for (int i = w0; i < w0 + 32 && i < g_n; i++) {
                const int s = g_fib[i].state;
                if (s == DONE) continue;
                wl++, live++;
                at_warp += s == WAIT_WARP;
                at_block += s == WAIT_BLOCK;
            }
            if (wl && at_warp == wl) {
                for (int i = w0; i < w0 + 32 && i < g_n; i++)
                    if (g_fib[i].state == WAIT_WARP) g_fib[i].state = RUN;
                released = true;
            }
        }
        if (!live) return;
        if (released) continue;
        if (at_block == live) {
            for (int i = 0; i < g_n; i++)
                if (g_fib[i].state == WAIT_BLOCK) g_fib[i].state = RUN;
            continue;
        }
        fprintf(stderr, "cuda emulator: deadlock in block (%u,%u,%u): %d threads live, %d at __syncthreads, the "
                        "rest at a warp shuffle their warp does not all reach\n",
                emu_block_idx.x, emu_block_idx.y, emu_block_idx.z, live, at_block);
        abort();
    }
}

void emu_launch(dim3 grid, dim3 block, cudaStream_t st, const std::function<void()> &kernel) {
    (void)st;
    const int n = (int)(block.x * block.y * block.z);
    if (n <= 0 || n > MAX_THREADS) {
        fprintf(stderr, "cuda emulator: a block of %d threads\n", n);
        abort();
    }
    while ((int)g_stacks.size() < n) g_stacks.push_back((char *)malloc(STACK_BYTES));
    g_fib.resize((size_t)n);
    g_n = n;
    g_kernel = &kernel;
    emu_block_dim = block;
    emu_grid_dim = grid;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                emu_block_idx = uint3{bx, by, bz};
                for (int i = 0; i < n; i++) {
                    g_fib[i].tid = uint3{(unsigned)i % block.x, (unsigned)(i / block.x) % block.y,
                                         (unsigned)(i / (block.x * block.y))};
                    g_fib[i].state = RUN;
                    g_fib[i].n_shfl = 0;
                    g_fib[i].n_mma = 0;
                    fiber_start(i);
                }
                run_block();
            }
}

// ---- runtime -----------------------------------------------------------------------------

static const size_t k_mem = (size_t)2 << 30; // the emulated device's memory
static size_t g_used;

static bool hidden() {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    return v && (!*v || !strcmp(v, "-1"));
}

cudaError_t cudaGetDeviceCount(int *n) {
    *n = hidden() ? 0 : 1;
    return *n ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev) {
    if (dev != 0 || hidden()) return cudaErrorInvalidValue;
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "CUDA emulator (CPU)");
    p->major = 9;
    p->multiProcessorCount = 1;
    p->totalGlobalMem = k_mem;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) { return dev == 0 && !hidden() ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) {
    *free_b = k_mem - g_used;
    *total = k_mem;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return "invalid argument";
    }
}

// Each allocation carries its size in a 256-byte header, for the memory accounting.
cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = NULL;
    if (bytes > k_mem - g_used) return cudaErrorMemoryAllocation;
    char *m = (char *)aligned_alloc(256, 256 + ((bytes + 255) & ~(size_t)255));
    if (!m) return cudaErrorMemoryAllocation;
    memcpy(m, &bytes, sizeof(bytes));
    g_used += bytes;
    *p = m + 256;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    char *m = (char *)p - 256;
    size_t bytes;
    memcpy(&bytes, m, sizeof(bytes));
    g_used -= bytes;
    free(m);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p) {
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    (void)kind;
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st) {
    (void)st;
    return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t st) {
    (void)kind;
    (void)st;
    if (width > dpitch || width > spitch) return cudaErrorInvalidValue;
    for (size_t r = 0; r < height; r++) memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t st) {
    (void)st;
    if (bytes) memset(p, v, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned flags) {
    (void)flags;
    *st = (cudaStream_t)(uintptr_t)1;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t st) {
    (void)st;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t st) {
    (void)st;
    return cudaSuccess;
}

// A table: the fragments' loads convert millions of halves, and the reference conversion is
// bit-by-bit software.
static float g_h2f[65536];
static bool g_h2f_ready;

float emu_h2f(uint16_t h) {
    if (!g_h2f_ready) {
        for (uint32_t i = 0; i < 65536; i++) g_h2f[i] = eng_f16_to_f32((uint16_t)i);
        g_h2f_ready = true;
    }
    return g_h2f[h];
}
uint16_t emu_f2h(float f) { return eng_f32_to_f16(f); }

// ---- warp matrix operations -------------------------------------------------------------

void emu_wmma_check(const void *p, unsigned ldm, size_t elem) {
    if ((uintptr_t)p % 32 || (ldm * elem) % 16) {
        fprintf(stderr, "cuda emulator: wmma pointer %p (must be 32-byte aligned) or ldm %u (must be a multiple of 16 "
                        "bytes) is invalid\n", p, ldm);
        abort();
    }
}

// The first live lane of the warp computes D = A B + C into a per-warp buffer (two banks, as
// the shuffles' slots) and every lane copies it after a warp barrier.
static float g_mma[2][MAX_THREADS / 32][16][16];

bool emu_warp_leader() {
    int leader = g_cur & ~31;
    while (leader < g_n && g_fib[leader].state == DONE) leader++;
    return g_cur == leader;
}

void emu_mma(float d[16][16], const float a[16][16], const float b[16][16], const float c[16][16]) {
    fiber *f = &g_fib[g_cur];
    const int bank = f->n_mma++ & 1;
    float(*out)[16] = g_mma[bank][g_cur >> 5];
    if (emu_warp_leader())
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                float s = c[i][j];
                for (int k = 0; k < 16; k++) s += a[i][k] * b[k][j];
                out[i][j] = s;
            }
    f->state = WAIT_WARP;
    yield_to_scheduler();
    memcpy(d, out, sizeof(g_mma[0][0]));
}

void __syncwarp(unsigned mask) {
    (void)mask;
    g_fib[g_cur].state = WAIT_WARP;
    yield_to_scheduler();
}
