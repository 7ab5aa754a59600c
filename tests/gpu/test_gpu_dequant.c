/*
 * test_gpu_dequant.c - parity of the CUDA dequantization kernels with the CPU reference
 * (bit-exact), on random blocks of every supported type. Skips without a CUDA device.
 */
#include "gputest.h"

#include <stdlib.h>
#include <string.h>

#include "quant.h"


static void test_gpu_dequant_matches_cpu_reference_bit_exactly(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    gpu_device_info info;
    dp_err err = {0};
    assert_int_equal(gpu_device_get_info(g_dev, &info, &err), DP_OK);
    print_message("  device %d: %s (sm_%d%d, %zu MiB)\n", g_dev, info.name, info.cc_major, info.cc_minor,
                  info.mem_total >> 20);
    const int types[] = {ENG_TYPE_F16, ENG_TYPE_BF16, ENG_TYPE_Q8_0, ENG_TYPE_Q4_0, ENG_TYPE_Q4_1,
                         ENG_TYPE_Q5_0, ENG_TYPE_Q5_1, ENG_TYPE_Q4_K, ENG_TYPE_Q5_K, ENG_TYPE_Q6_K};
    enum { N = 256 * 1024 };
    float *x = malloc(N * 4), *cpu = malloc(N * 4), *gpu = malloc(N * 4);
    uint8_t *q = malloc(N * 4);
    uint64_t s = 11;
    for (int i = 0; i < N; i++) x[i] = tu_randn(&s);
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        int t = types[k];
        assert_int_equal(eng_quantize_row(t, x, q, N), DP_OK);
        assert_int_equal(eng_dequantize_row(t, q, cpu, N), DP_OK);
        memset(gpu, 0xFF, N * 4);
        assert_int_equal(gpu_dequantize_host(g_dev, t, q, eng_row_size(t, N), gpu, N, &err), DP_OK);
        for (int i = 0; i < N; i++)
            if (memcmp(&cpu[i], &gpu[i], 4) != 0)
                fail_msg("%s element %d: gpu %.9g cpu %.9g", eng_type_name(t), i, (double)gpu[i], (double)cpu[i]);
    }
    free(x);
    free(cpu);
    free(gpu);
    free(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_dequant_matches_cpu_reference_bit_exactly),
    };
    return cmocka_run_group_tests_name("gpu_dequant", tests, gpu_setup, NULL);
}
