/*
 * test_walk.c - input folder listing: glob semantics, stable order, include/exclude, size
 * limit, symbolic links (skipped, followed, loops cut) and special files.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform.h"
#include "walk.h"

static void test_glob_semantics(void **state) {
    (void)state;
    const struct { const char *p, *s; bool m; } c[] = {
        {"**/*", "a.txt", true},          {"**/*", "x/y/z.md", true},       {"*.md", "a.md", true},
        {"*.md", "x/a.md", false},        {"**/*.md", "a.md", true},        {"**/*.md", "x/y/a.md", true},
        {"**/skip/**", "skip/a", true},   {"**/skip/**", "x/skip/y/z", true}, {"**/skip/**", "skipper/a", false},
        {"docs/**", "docs/a/b.txt", true}, {"docs/**", "doc/a", false},     {"a?c", "abc", true},
        {"a?c", "a/c", false},            {"[ab]*.txt", "b1.txt", true},    {"[!ab]*.txt", "b1.txt", false},
        {"[a-c].txt", "c.txt", true},     {"[a-c].txt", "d.txt", false},    {"*", "", true},
        {"src/**/*.c", "src/main.c", true}, {"src/**/*.c", "src/x/y.c", true}, {"src/**/*.c", "lib/x.c", false},
        {"[", "[", true},                 {"**", "any/thing", true},        {"a*b*c", "axxbyyc", true},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        if (pl_glob_match(c[i].p, c[i].s) != c[i].m)
            fail_msg("glob '%s' on '%s': want %s", c[i].p, c[i].s, c[i].m ? "match" : "no match");
}

static void mk(const char *rel, const char *content) {
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", tu_tmp("tree"), rel);
    tu_write_file(p, content, strlen(content));
}

static void test_walk_order_filters_links_and_limits(void **state) {
    (void)state;
    dp_err err = {0};
    const char *root = tu_tmp("tree");
    char p[1024], q[1024];
    snprintf(p, sizeof(p), "%s/sub/skip", root);
    assert_int_equal(dp_mkdir_p(p, &err), DP_OK);
    mk("b.txt", "b");
    mk("a.md", "a");
    mk("big.txt", "0123456789012345678901234567890123456789");
    mk("sub/c.txt", "c");
    mk("sub/skip/d.txt", "d");
    mk("sub/e.png", "e");
#ifndef _WIN32 /* (links need a privilege on Windows, and it has no FIFOs) */
    snprintf(p, sizeof(p), "%s/sub", root);
    snprintf(q, sizeof(q), "%s/link", root);
    assert_int_equal(symlink(p, q), 0); /* a folder link */
    snprintf(q, sizeof(q), "%s/sub/up", root);
    assert_int_equal(symlink(root, q), 0); /* a loop when followed */
    snprintf(q, sizeof(q), "%s/fifo", root);
    assert_int_equal(mkfifo(q, 0644), 0);
    const size_t links = 2, fifos = 1;
#else
    (void)q;
    const size_t links = 0, fifos = 0;
#endif
    const char *inc[] = {"**/*"}, *exc[] = {"**/skip/**"};
    pl_walk_opts o = {inc, 1, exc, 1, false, 20, false};
    pl_walk w = {0};
    assert_int_equal(pl_walk_dir(root, &o, &w, &err), DP_OK);
    const char *want[] = {"a.md", "b.txt", "big.txt", "sub/c.txt", "sub/e.png"};
    assert_int_equal(w.n, 5);
    for (size_t i = 0; i < 5; i++) assert_string_equal(w.files[i].rel, want[i]);
    assert_true(w.files[2].too_large && !w.files[0].too_large);
    assert_int_equal(w.n_skipped_links, links);
    assert_int_equal(w.n_skipped_special, fifos);
    char abs[1024];
    snprintf(abs, sizeof(abs), "%s/sub/c.txt", root);
    assert_string_equal(w.files[3].abs, abs);
    pl_walk_free(&w);
    /* followed links: link/ appears, the loop through sub/up is cut */
    o.follow_symlinks = true;
    assert_int_equal(pl_walk_dir(root, &o, &w, &err), DP_OK);
    bool has_link = false;
    for (size_t i = 0; i < w.n; i++) has_link |= !strcmp(w.files[i].rel, "link/c.txt");
    assert_true(has_link == (links > 0));
    assert_true(w.n < 20);
    pl_walk_free(&w);
    /* include narrows, exclude wins */
    const char *inc2[] = {"**/*.txt"}, *exc2[] = {"b.txt"};
    pl_walk_opts o2 = {inc2, 1, exc2, 1, false, 0, false};
    assert_int_equal(pl_walk_dir(root, &o2, &w, &err), DP_OK);
    assert_int_equal(w.n, 3); /* big.txt, sub/c.txt, sub/skip/d.txt */
    assert_string_equal(w.files[0].rel, "big.txt");
    assert_string_equal(w.files[2].rel, "sub/skip/d.txt");
    pl_walk_free(&w);
    assert_int_equal(pl_walk_dir(tu_tmp("nowhere"), &o2, &w, &err), DP_ENOENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob_semantics),
        cmocka_unit_test(test_walk_order_filters_links_and_limits),
    };
    return cmocka_run_group_tests_name("walk", tests, NULL, NULL);
}
