/* test_status.c - status names/messages come from one list; dp_err keeps and prefixes detail. */
#include "testutil.h"

#include <errno.h>
#include <string.h>

#include "status.h"

static void test_status_names_and_messages_are_distinct(void **state) {
    (void)state;
    const dp_status all[] = {
#define X(n, v, m) DP_##n,
        DP_STATUS_MAP(X)
#undef X
    };
    size_t n = sizeof(all) / sizeof(all[0]);
    assert_true(n >= 16);
    for (size_t i = 0; i < n; i++) {
        assert_string_not_equal(dp_status_name(all[i]), "DP_UNKNOWN");
        for (size_t j = i + 1; j < n; j++) {
            assert_int_not_equal(all[i], all[j]);
            assert_string_not_equal(dp_status_name(all[i]), dp_status_name(all[j]));
            assert_string_not_equal(dp_status_str(all[i]), dp_status_str(all[j]));
        }
    }
    assert_int_equal(DP_OK, 0);
    assert_string_equal(dp_status_name(DP_EFORMAT), "DP_EFORMAT");
    assert_string_equal(dp_status_name((dp_status)-999), "DP_UNKNOWN");
}

static void test_status_codes_are_never_renumbered(void **state) {
    (void)state; /* these values appear in logs; appending is fine, renumbering is not */
    assert_int_equal(DP_ENOMEM, -2);
    assert_int_equal(DP_EFORMAT, -6);
    assert_int_equal(DP_EOF, -9);
    assert_int_equal(DP_ENOSPC, -12);
}

static void test_status_from_errno_maps_common_errors(void **state) {
    (void)state;
    assert_int_equal(dp_status_from_errno(ENOENT), DP_ENOENT);
    assert_int_equal(dp_status_from_errno(ENOSPC), DP_ENOSPC);
#ifdef EDQUOT
    assert_int_equal(dp_status_from_errno(EDQUOT), DP_ENOSPC);
#endif
    assert_int_equal(dp_status_from_errno(EACCES), DP_EACCES);
    assert_int_equal(dp_status_from_errno(EIO), DP_EIO);
}

static void test_err_set_returns_code_and_prefix_adds_context(void **state) {
    (void)state;
    dp_err err = {0};
    assert_int_equal(dp_err_set(&err, DP_EFORMAT, "n_dims is %u but must be <= 4", 5u), DP_EFORMAT);
    assert_string_equal(err.msg, "n_dims is 5 but must be <= 4");
    dp_err_prefix(&err, "loading %s", "m.gguf");
    assert_string_equal(dp_err_msg(&err), "loading m.gguf: n_dims is 5 but must be <= 4");
    assert_int_equal(err.code, DP_EFORMAT);
    assert_int_equal(dp_err_set(NULL, DP_EIO, "ignored"), DP_EIO); /* NULL err is allowed */
    dp_err_clear(&err);
    assert_int_equal(err.code, DP_OK);
    err.code = DP_ENOMEM;
    assert_string_equal(dp_err_msg(&err), "out of memory");
}

static void test_err_prefix_truncates_safely(void **state) {
    (void)state;
    dp_err err = {0};
    char big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    dp_err_set(&err, DP_EIO, "%s", big);
    dp_err_prefix(&err, "%s", big);
    assert_int_equal(strlen(err.msg), DP_ERR_MSG_MAX - 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names_and_messages_are_distinct),
        cmocka_unit_test(test_status_codes_are_never_renumbered),
        cmocka_unit_test(test_status_from_errno_maps_common_errors),
        cmocka_unit_test(test_err_set_returns_code_and_prefix_adds_context),
        cmocka_unit_test(test_err_prefix_truncates_safely),
    };
    return cmocka_run_group_tests_name("status", tests, NULL, NULL);
}
