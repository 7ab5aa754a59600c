/* test_sha256.c - FIPS 180-4 test vectors, one-shot and streamed in uneven pieces. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "sha256.h"

static void hex_of(const void *d, size_t n, char hex[65]) {
    uint8_t out[32];
    dp_sha256_digest(d, n, out);
    dp_sha256_hex(out, hex);
}

static void test_sha256_fips_vectors(void **state) {
    (void)state;
    char hex[65];
    hex_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m, strlen(m), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_sha256_million_a_streamed_in_odd_pieces(void **state) {
    (void)state;
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    dp_sha256 s;
    dp_sha256_init(&s);
    size_t off = 0, step = 1;
    while (off < 1000000) {
        size_t k = step < 1000000 - off ? step : 1000000 - off;
        dp_sha256_update(&s, a + off, k);
        off += k;
        step = step * 7 % 1000 + 1;
    }
    uint8_t out[32];
    char hex[65];
    dp_sha256_final(&s, out);
    dp_sha256_hex(out, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

static void test_sha256_block_boundaries(void **state) {
    (void)state; /* lengths around the 56/64-byte padding edges, streamed vs one-shot */
    uint8_t buf[200];
    for (int i = 0; i < 200; i++) buf[i] = (uint8_t)(i * 31 + 7);
    for (size_t n = 50; n < 140; n++) {
        uint8_t a[32], b[32];
        dp_sha256_digest(buf, n, a);
        dp_sha256 s;
        dp_sha256_init(&s);
        dp_sha256_update(&s, buf, n / 3);
        dp_sha256_update(&s, buf + n / 3, n - n / 3);
        dp_sha256_final(&s, b);
        assert_memory_equal(a, b, 32);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_fips_vectors),
        cmocka_unit_test(test_sha256_million_a_streamed_in_odd_pieces),
        cmocka_unit_test(test_sha256_block_boundaries),
    };
    return cmocka_run_group_tests_name("sha256", tests, NULL, NULL);
}
