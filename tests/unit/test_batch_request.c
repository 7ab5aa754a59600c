/*
 * test_batch_request.c - OpenAI batch request lines (pipeline/input/batch_request.c): what a valid
 * line reads as (defaults, nulls as absent, content parts, a one-prompt list), and for each way
 * a line can be wrong, a refusal that names the line and the field.
 */
#include "testutil.h"

#include <stdarg.h>
#include <string.h>

#include "batch_request.h"

#define CHAT  "{\"custom_id\": \"r1\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\", \"body\": "
#define COMPL "{\"custom_id\": \"r1\", \"url\": \"/v1/completions\", \"body\": "

static dp_status parse(const char *line, pl_batch_req *r, dp_err *err) {
    return pl_batch_req_parse(line, strlen(line), 7, 1024, r, err);
}

/* line must be refused with a message holding every one of the NULL-ended fragments */
static void refused(const char *line, const char *custom_id, ...) {
    pl_batch_req r;
    dp_err err = {0};
    if (parse(line, &r, &err) != DP_EINVAL) fail_msg("accepted: %s", line);
    if (strncmp(err.msg, "line 7", 6)) fail_msg("'%s' does not name the line (%s)", err.msg, line);
    assert_non_null(r.custom_id);
    assert_string_equal(r.custom_id, custom_id);
    va_list ap;
    va_start(ap, custom_id);
    for (const char *frag; (frag = va_arg(ap, const char *));)
        if (!strstr(err.msg, frag)) fail_msg("'%s' lacks '%s' (%s)", err.msg, frag, line);
    va_end(ap);
    pl_batch_req_free(&r);
}

static void test_valid_chat_line(void **state) {
    (void)state;
    pl_batch_req r;
    dp_err err = {0};
    assert_int_equal(parse(CHAT "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be brief.\"}, {\"role\": "
                                "\"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", "
                                "\"text\": \"b\"}]}], \"max_tokens\": 9, \"temperature\": 0.5, \"top_p\": null, "
                                "\"top_k\": -1, \"n\": 1, \"logprobs\": false, \"stop\": \"END\", \"seed\": 4, "
                                "\"user\": \"ignored\"}}",
                           &r, &err),
                     DP_OK);
    assert_true(r.chat);
    assert_string_equal(r.custom_id, "r1");
    assert_int_equal(r.line, 7);
    assert_int_equal(r.n_msgs, 2);
    assert_string_equal(r.msgs[0].role, "system"); /* OpenAI's "developer" */
    assert_string_equal(r.msgs[1].content, "a\nb");
    assert_int_equal(r.max_tokens, 9);
    assert_true(r.sp.temp == 0.5f);
    assert_true(r.sp.top_p == 1.0f); /* null: the default */
    assert_int_equal(r.sp.top_k, 0); /* -1: off */
    assert_int_equal(r.n_stop, 1);
    assert_string_equal(r.stop[0], "END");
    const uint64_t seed = r.sp.seed;
    pl_batch_req_free(&r);
    /* the seed is the request's own: another seed or custom_id gives another, a neighbour cannot */
    assert_int_equal(parse(CHAT "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"seed\": 5}}", &r, &err),
                     DP_OK);
    assert_true(r.sp.seed != seed);
    assert_int_equal(r.max_tokens, 256);
    assert_true(r.sp.temp == 1.0f);
    pl_batch_req_free(&r);
}

static void test_valid_completion_line(void **state) {
    (void)state;
    pl_batch_req r;
    dp_err err = {0};
    assert_int_equal(parse(COMPL "{\"prompt\": [\"Once\"], \"max_completion_tokens\": 1024, \"stop\": [\"a\", \"b\"], "
                                 "\"max_tokens\": null}}",
                           &r, &err),
                     DP_OK);
    assert_false(r.chat);
    assert_string_equal(r.prompt, "Once");
    assert_int_equal(r.max_tokens, 1024);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "b");
    pl_batch_req_free(&r);
}

static void test_refusals_name_line_and_field(void **state) {
    (void)state;
    refused("this is not json", "", "line 7, column", "not valid JSON", NULL);
    refused("{\"custom_id\": \"a\", \"custom_id\": \"b\"}", "", "not valid JSON", "duplicate", NULL);
    refused("[1, 2]", "", "must be a JSON object", NULL);
    refused("{\"url\": \"/v1/completions\", \"body\": {\"prompt\": \"x\"}}", "", "custom_id", NULL);
    refused("{\"custom_id\": 5, \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"x\"}}", "", "custom_id", NULL);
    refused("{\"custom_id\": \"q\", \"method\": \"GET\", \"url\": \"/v1/completions\", \"body\": {}}", "q", "method",
            "\"GET\"", NULL);
    refused("{\"custom_id\": \"q\", \"url\": \"/v1/images\", \"body\": {}}", "q", "url", "/v1/embeddings", NULL);
    /* /v1/embeddings: input a non-empty string or list of them, float or base64, no dimensions */
    refused("{\"custom_id\": \"q\", \"url\": \"/v1/embeddings\", \"body\": {}}", "q", "body.input", NULL);
    refused("{\"custom_id\": \"q\", \"url\": \"/v1/embeddings\", \"body\": {\"input\": [\"a\", \"\"]}}", "q",
            "body.input[1]", "non-empty", NULL);
    refused("{\"custom_id\": \"q\", \"url\": \"/v1/embeddings\", \"body\": {\"input\": [[1, 2]]}}", "q",
            "token id lists", NULL);
    refused("{\"custom_id\": \"q\", \"url\": \"/v1/embeddings\", \"body\": {\"input\": \"a\", \"encoding_format\": "
            "\"int8\"}}", "q", "encoding_format", NULL);
    refused("{\"custom_id\": \"q\", \"url\": \"/v1/embeddings\", \"body\": {\"input\": \"a\", \"dimensions\": 8}}",
            "q", "dimensions", NULL);
    {
        pl_batch_req r;
        dp_err err = {0};
        assert_int_equal(parse("{\"custom_id\": \"e\", \"url\": \"/v1/embeddings\", \"body\": {\"input\": [\"a\", "
                               "\"b c\"], \"model\": \"m\", \"encoding_format\": \"base64\", \"user\": \"u\"}}",
                               &r, &err),
                         DP_OK);
        assert_true(r.embed && r.base64);
        assert_int_equal(r.n_inputs, 2);
        assert_string_equal(r.inputs[1], "b c");
        assert_string_equal(r.model, "m");
        pl_batch_req_free(&r);
    }
    refused("{\"custom_id\": \"q\", \"url\": \"/v1/completions\"}", "q", "body must be an object", NULL);
    refused(CHAT "{}}", "r1", "body.messages", "nothing", NULL);
    refused(CHAT "{\"messages\": []}}", "r1", "body.messages", "an empty list", NULL);
    refused(CHAT "{\"messages\": [\"hi\"]}}", "r1", "body.messages[0] must be an object", NULL);
    refused(CHAT "{\"messages\": [{\"content\": \"hi\"}]}}", "r1", "body.messages[0].role", NULL);
    refused(CHAT "{\"messages\": [{\"role\": \"user\"}]}}", "r1", "body.messages[0].content", NULL);
    refused(CHAT "{\"messages\": [{\"role\": \"user\", \"content\": 3}]}}", "r1", "body.messages[0].content", "3",
            NULL);
    refused(CHAT "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]}}",
            "r1", "body.messages[0].content[0]", "image_url", "text parts", NULL);
    refused(CHAT "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\u0000b\"}]}}", "r1", "NUL", NULL);
    refused(COMPL "{}}", "r1", "body.prompt", NULL);
    refused(COMPL "{\"prompt\": [\"a\", \"b\"]}}", "r1", "list of 2 prompts", NULL);
    refused(COMPL "{\"prompt\": [1, 2, 3]}}", "r1", "body.prompt", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"max_tokens\": 0}}", "r1", "body.max_tokens", "from 1 to 1024", "not 0", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"max_tokens\": 1025}}", "r1", "body.max_tokens", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"max_tokens\": 2.5}}", "r1", "body.max_tokens", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"max_completion_tokens\": \"9\"}}", "r1", "body.max_completion_tokens", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"temperature\": -0.1}}", "r1", "body.temperature", ">= 0", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"temperature\": \"hot\"}}", "r1", "body.temperature", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"top_p\": 0}}", "r1", "body.top_p", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"top_p\": 1.5}}", "r1", "body.top_p", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"min_p\": 2}}", "r1", "body.min_p", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"top_k\": 1.5}}", "r1", "body.top_k", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"presence_penalty\": 3}}", "r1", "body.presence_penalty", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"frequency_penalty\": true}}", "r1", "body.frequency_penalty", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"seed\": \"7\"}}", "r1", "body.seed", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"stop\": [\"a\", 3]}}", "r1", "body.stop[1]", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"stop\": \"\"}}", "r1", "body.stop", "empty", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"n\": 2}}", "r1", "body.n", "one choice", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"best_of\": 3}}", "r1", "body.best_of", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"logprobs\": 5}}", "r1", "body.logprobs", NULL);
    refused(CHAT "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true}}", "r1",
            "body.logprobs", NULL);
    refused(COMPL "{\"prompt\": \"x\", \"echo\": true}}", "r1", "body.echo", NULL);
    refused(CHAT "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{}]}}", "r1", "body.tools",
            NULL);
    refused(CHAT "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": "
                 "\"regex\"}}}",
            "r1", "body.response_format", "regex", NULL);
    refused(CHAT "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": "
                 "\"json_schema\", \"json_schema\": {\"schema\": {\"type\": \"object\", \"properties\": {\"a\": "
                 "{\"not\": {}}}}}}}}",
            "r1", "body.response_format", "/properties/a", "'not'", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_chat_line),
        cmocka_unit_test(test_valid_completion_line),
        cmocka_unit_test(test_refusals_name_line_and_field),
    };
    return cmocka_run_group_tests_name("batch_request", tests, NULL, NULL);
}
