/* test_utf8.c - strict decoding, U+FFFD repair by maximal subpart, streaming tails. */
#include "testutil.h"

#include <string.h>

#include "utf8.h"

static void test_utf8_decodes_every_length(void **state) {
    (void)state;
    const struct { const char *s; uint32_t cp; size_t len; } v[] = {
        {"A", 0x41, 1}, {"\xC3\xA9", 0xE9, 2}, {"\xE4\xB8\xAD", 0x4E2D, 3}, {"\xF0\x9F\x98\x80", 0x1F600, 4},
        {"\xF4\x8F\xBF\xBF", 0x10FFFF, 4}, {"\xEF\xBF\xBD", 0xFFFD, 3},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        uint32_t cp;
        bool ok;
        assert_int_equal(dp_utf8_decode((const uint8_t *)v[i].s, strlen(v[i].s), &cp, &ok), v[i].len);
        assert_true(ok);
        assert_int_equal(cp, v[i].cp);
        uint8_t enc[4];
        assert_int_equal(dp_utf8_encode(cp, enc), v[i].len);
        assert_memory_equal(enc, v[i].s, v[i].len);
    }
}

static void test_utf8_rejects_overlong_surrogate_and_out_of_range(void **state) {
    (void)state;
    const char *bad[] = {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80",
                         "\x80", "\xFF"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(dp_utf8_valid((const uint8_t *)bad[i], strlen(bad[i])));
    uint8_t enc[4];
    assert_int_equal(dp_utf8_encode(0xD800, enc), 0);
    assert_int_equal(dp_utf8_encode(0x110000, enc), 0);
}

static void test_utf8_repair_replaces_maximal_subparts(void **state) {
    (void)state;
    /* "a" + truncated 3-byte seq (E4 B8) + "b" + lone continuation + "c": two replacements,
     * the truncated sequence counts once (Unicode's maximal-subpart practice). */
    const uint8_t in[] = {'a', 0xE4, 0xB8, 'b', 0x80, 'c'};
    uint8_t out[32];
    size_t bad = 0;
    size_t n = dp_utf8_repair(in, sizeof(in), out, &bad);
    const char *want = "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(out, want, n);
    assert_int_equal(bad, 2);
    assert_true(dp_utf8_valid(out, n));
}

static void test_utf8_incomplete_tail_holds_partial_characters(void **state) {
    (void)state;
    const uint8_t emoji[] = {0xF0, 0x9F, 0x98, 0x80};
    for (size_t k = 1; k < 4; k++) assert_int_equal(dp_utf8_incomplete_tail(emoji, k), k);
    assert_int_equal(dp_utf8_incomplete_tail(emoji, 4), 0);
    const uint8_t text[] = {'h', 'i', 0xE4, 0xB8};
    assert_int_equal(dp_utf8_incomplete_tail(text, 4), 2);
    const uint8_t broken[] = {'h', 0xE0, 0x80}; /* not a valid prefix: nothing to hold */
    assert_int_equal(dp_utf8_incomplete_tail(broken, 3), 0);
    assert_int_equal(dp_utf8_incomplete_tail((const uint8_t *)"abc", 3), 0);
}

static void test_utf8_all_code_points_round_trip(void **state) {
    (void)state;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        uint8_t enc[4];
        size_t n = dp_utf8_encode(cp, enc);
        uint32_t back;
        bool ok;
        if (dp_utf8_decode(enc, n, &back, &ok) != n || !ok || back != cp) fail_msg("cp %x", cp);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_decodes_every_length),
        cmocka_unit_test(test_utf8_rejects_overlong_surrogate_and_out_of_range),
        cmocka_unit_test(test_utf8_repair_replaces_maximal_subparts),
        cmocka_unit_test(test_utf8_incomplete_tail_holds_partial_characters),
        cmocka_unit_test(test_utf8_all_code_points_round_trip),
    };
    return cmocka_run_group_tests_name("utf8", tests, NULL, NULL);
}
