/*
 * test_completion.c - the response object (run/completion.c): a thinking model's reasoning goes
 * to message.reasoning_content and never into content, whatever shape the answer has.
 */
#include "testutil.h"

#include <jansson.h>
#include <string.h>

#include "completion.h"

static void expect_split(const char *t, const char *reasoning, const char *content) {
    const pl_reasoning_split s = pl_split_reasoning(t, strlen(t));
    char r[256] = "", c[256] = "";
    if (s.has_reasoning) snprintf(r, sizeof(r), "%.*s", (int)s.r_len, t + s.r_at);
    snprintf(c, sizeof(c), "%.*s", (int)s.c_len, t + s.c_at);
    if ((reasoning ? !s.has_reasoning || strcmp(r, reasoning) : s.has_reasoning) || strcmp(c, content))
        fail_msg("'%s': reasoning '%s' content '%s', expected '%s' / '%s'", t, s.has_reasoning ? r : "(none)", c,
                 reasoning ? reasoning : "(none)", content);
}

static void test_split_reasoning(void **state) {
    (void)state;
    expect_split("<think>\nLet me see.\n</think>\n\nThe answer is 4.", "Let me see.", "The answer is 4.");
    expect_split("The answer is 4.", NULL, "The answer is 4.");
    /* Qwen3.5 writes <think> into the prompt: the answer starts inside the block */
    expect_split("First, add.\n</think>\n\n{\"x\": 1}", "First, add.", "{\"x\": 1}");
    /* cut by max_tokens inside the block: all reasoning, no content */
    expect_split("<think>\nStill thinking about", "Still thinking about", "");
    expect_split("<think>\n\n</think>\n\nshort", "", "short");
    expect_split("", NULL, "");
    /* a tag later in the text is not a reasoning block */
    expect_split("Use <think> tags like this.", NULL, "Use <think> tags like this.");
}

static void test_reasoning_content_in_message(void **state) {
    (void)state;
    const char *t = "<think>\nplan\n</think>\n\nanswer";
    pl_completion c = {"cid", "m.gguf", "fp_0", true, t, strlen(t), "stop", 5, 7, 1700000000, true};
    json_t *r = pl_completion_response(&c);
    json_t *msg = json_object_get(json_array_get(json_object_get(json_object_get(r, "body"), "choices"), 0), "message");
    assert_string_equal(json_string_value(json_object_get(msg, "content")), "answer");
    assert_string_equal(json_string_value(json_object_get(msg, "reasoning_content")), "plan");
    json_decref(r);
    c.thinking = false; /* thinking off: the text is the content, as generated */
    r = pl_completion_response(&c);
    msg = json_object_get(json_array_get(json_object_get(json_object_get(r, "body"), "choices"), 0), "message");
    assert_string_equal(json_string_value(json_object_get(msg, "content")), t);
    assert_null(json_object_get(msg, "reasoning_content"));
    json_decref(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_reasoning),
        cmocka_unit_test(test_reasoning_content_in_message),
    };
    return cmocka_run_group_tests_name("completion", tests, NULL, NULL);
}
