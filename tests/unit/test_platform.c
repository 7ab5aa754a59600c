/* test_platform.c - files, sync, rename, mmap, threads, condvars and advisory locks. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "platform.h"

static void test_file_write_read_truncate_sync(void **state) {
    (void)state;
    dp_err err = {0};
    dp_file f;
    const char *p = tu_tmp("f.bin");
    assert_int_equal(dp_file_open(&f, p, DP_FILE_READ | DP_FILE_WRITE | DP_FILE_CREATE | DP_FILE_TRUNC, &err), DP_OK);
    assert_int_equal(dp_file_write(&f, "hello world", 11, &err), DP_OK);
    assert_int_equal(dp_file_datasync(&f, &err), DP_OK);
    uint64_t size;
    assert_int_equal(dp_file_size(&f, &size, &err), DP_OK);
    assert_int_equal(size, 11);
    char buf[8] = {0};
    assert_int_equal(dp_file_pread(&f, buf, 5, 6, &err), DP_OK);
    assert_string_equal(buf, "world");
    assert_int_equal(dp_file_pread(&f, buf, 8, 6, &err), DP_EOF);
    assert_int_equal(dp_file_truncate(&f, 5, &err), DP_OK);
    assert_int_equal(dp_file_size(&f, &size, &err), DP_OK);
    assert_int_equal(size, 5);
    assert_int_equal(dp_file_sync(&f, &err), DP_OK);
    assert_int_equal(dp_file_close(&f, &err), DP_OK);
    assert_int_equal(dp_file_close(&f, &err), DP_OK); /* closing twice is harmless */
    assert_int_equal(dp_rename(p, tu_tmp("g.bin"), &err), DP_OK);
    assert_int_equal(dp_dir_sync(tu_tmpdir(), &err), DP_OK);
    assert_false(dp_path_exists(p));
    char *data;
    size_t n;
    assert_int_equal(dp_file_read_all(tu_tmp("g.bin"), 100, &data, &n, &err), DP_OK);
    assert_int_equal(n, 5);
    assert_string_equal(data, "hello");
    free(data);
    assert_int_equal(dp_file_read_all(tu_tmp("g.bin"), 3, &data, &n, &err), DP_ERANGE);
}

static void test_file_open_missing_names_the_path(void **state) {
    (void)state;
    dp_err err = {0};
    dp_file f;
    assert_int_equal(dp_file_open(&f, "/nonexistent/dir/x", DP_FILE_READ, &err), DP_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/dir/x"));
    dp_map m;
    assert_int_equal(dp_map_open(&m, "/nonexistent/y.gguf", &err), DP_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/y.gguf"));
}

static void test_map_views_file_bytes(void **state) {
    (void)state;
    dp_err err = {0};
    tu_write_file(tu_tmp("m.bin"), "0123456789", 10);
    dp_map m;
    assert_int_equal(dp_map_open(&m, tu_tmp("m.bin"), &err), DP_OK);
    assert_int_equal(m.size, 10);
    assert_memory_equal(m.data, "0123456789", 10);
    dp_map_close(&m);
    dp_map_close(&m);
    tu_write_file(tu_tmp("empty.bin"), "", 0);
    assert_int_equal(dp_map_open(&m, tu_tmp("empty.bin"), &err), DP_OK);
    assert_int_equal(m.size, 0);
    dp_map_close(&m);
    assert_int_equal(dp_map_open(&m, tu_tmpdir(), &err), DP_EINVAL); /* a directory */
}

static void test_mkdir_p_creates_parents(void **state) {
    (void)state;
    dp_err err = {0};
    assert_int_equal(dp_mkdir_p(tu_tmp("a/b/c"), &err), DP_OK);
    assert_int_equal(dp_mkdir_p(tu_tmp("a/b/c"), &err), DP_OK);
    assert_true(dp_path_exists(tu_tmp("a/b/c")));
    tu_write_file(tu_tmp("a/file"), "x", 1);
    assert_int_equal(dp_mkdir_p(tu_tmp("a/file"), &err), DP_EEXIST);
}

typedef struct shared {
    dp_mutex m;
    dp_cond c;
    int counter;
    int ready;
} shared;

static void *worker(void *arg) {
    shared *s = arg;
    for (int i = 0; i < 10000; i++) {
        dp_mutex_lock(&s->m);
        s->counter++;
        dp_mutex_unlock(&s->m);
    }
    dp_mutex_lock(&s->m);
    s->ready++;
    dp_cond_broadcast(&s->c);
    dp_mutex_unlock(&s->m);
    return arg;
}

static void test_threads_mutex_and_cond(void **state) {
    (void)state;
    shared s = {0};
    dp_mutex_init(&s.m);
    dp_cond_init(&s.c);
    dp_thread t[4];
    for (int i = 0; i < 4; i++) assert_int_equal(dp_thread_create(&t[i], worker, &s, NULL), DP_OK);
    dp_mutex_lock(&s.m);
    while (s.ready < 4) dp_cond_wait(&s.c, &s.m);
    dp_mutex_unlock(&s.m);
    for (int i = 0; i < 4; i++) assert_ptr_equal(dp_thread_join(&t[i]), &s);
    assert_int_equal(s.counter, 40000);
    dp_cond_free(&s.c);
    dp_mutex_free(&s.m);
    assert_true(dp_cpu_count() >= 1);
    uint64_t a = dp_time_ns(), b = dp_time_ns();
    assert_true(b >= a);
}

static void test_lock_is_exclusive_and_released(void **state) {
    (void)state;
    dp_err err = {0};
    dp_file a, b;
    const char *p = tu_tmp("run.lock");
    assert_int_equal(dp_lock_acquire(&a, p, &err), DP_OK);
    assert_int_equal(dp_lock_acquire(&b, p, &err), DP_EBUSY); /* flock is per open file */
    assert_non_null(strstr(err.msg, "locked"));
    dp_lock_release(&a);
    assert_int_equal(dp_lock_acquire(&b, p, &err), DP_OK);
    dp_lock_release(&b);
}

/* UTC dates for record metadata: the same text from every platform's implementation */
static void test_time_format_is_utc(void **state) {
    (void)state;
    static const struct {
        int64_t t;
        const char *want;
    } cases[] = {{0, "1970-01-01T00:00:00Z"}, {86399, "1970-01-01T23:59:59Z"}, {951782400, "2000-02-29T00:00:00Z"},
                 {1796430143, "2026-12-05T00:22:23Z"}, {4102444799, "2099-12-31T23:59:59Z"}};
    char out[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dp_time_format(cases[i].t, false, out);
        assert_string_equal(out, cases[i].want);
        dp_time_format(cases[i].t, true, out);
        assert_memory_equal(out, cases[i].want, 10);
        assert_int_equal(strlen(out), 10);
    }
    assert_true(dp_time_wall() > 1700000000); /* a clock in this century */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_write_read_truncate_sync),
        cmocka_unit_test(test_file_open_missing_names_the_path),
        cmocka_unit_test(test_map_views_file_bytes),
        cmocka_unit_test(test_mkdir_p_creates_parents),
        cmocka_unit_test(test_threads_mutex_and_cond),
        cmocka_unit_test(test_lock_is_exclusive_and_released),
        cmocka_unit_test(test_time_format_is_utc),
    };
    return cmocka_run_group_tests_name("platform", tests, NULL, NULL);
}
