/*
 * test_grammar.c - GBNF grammars: what the parser refuses (with line and column), which texts a
 * grammar takes byte by byte (UTF-8 classes across token boundaries included), the token mask
 * from the trie walk against asking token by token, and generation under a JSON grammar with
 * random logits (the worst case) against jansson's parser, an independent judge.
 */
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static eng_tokenizer *g_tok;

static int setup(void **state) {
    (void)state;
    return (g_tok = tu_qwen_tokenizer()) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    eng_tokenizer_free(g_tok);
    return 0;
}

static const char *k_json =
    "# JSON, objects at the top\n"
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::=\n"
    "  \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\"\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,3} )?\n"
    "ws     ::= [ \\t\\n]{0,4}\n";

static eng_grammar *compile(const char *text) {
    eng_grammar *g = NULL;
    dp_err err = {0};
    if (eng_grammar_compile(g_tok, text, strlen(text), &g, &err)) fail_msg("compile: %s", err.msg);
    return g;
}

/* Whether the grammar takes the whole text as a complete sentence. */
static bool takes(eng_grammar *g, const char *text) {
    eng_matcher *m;
    assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
    bool ok = eng_matcher_accept_bytes(m, text, strlen(text)) && eng_matcher_can_end(m);
    if (!*text) ok = eng_matcher_can_end(m);
    eng_matcher_free(m);
    return ok;
}

static void test_parse_errors_name_line_and_column(void **state) {
    (void)state;
    struct {
        const char *text, *want;
    } cases[] = {
        {"root ::= \"a\" b\n", "rule 'b' is used but never defined"},
        {"rot ::= \"a\"\n", "no rule named 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"\n", "line 2"},
        {"root ::= ( \"a\"\n", "'(' without its ')'"},
        {"root ::= \"a\n", "line 1"},
        {"root ::= [a-\n", "line 1"},
        {"root ::= [z-a]\n", "runs backwards"},
        {"root ::= \"a\"{3,1}\n", "n < m"},
        {"root ::= *\n", "without anything before it"},
        {"root ::= \"\\q\"\n", "unknown escape"},
        {"root ::= root \"a\" | \"b\"\n", "left-recursive"},
        {"root ::= x\nx ::= ws root\nws ::= \" \"?\n", "left-recursive"},
        {"root ::= ( \"a\"? )* \"b\"\n", "left-recursive"},
        {"root ::= <[123]>\n", "token references"},
        {"root ::= \"a\"\n  \"b\" ::= c\n", "line 2"},
        {"root ::= [^\\x00-\\U0010FFFF]\n", "matches nothing"},
        {"root ::= \"a\"{100001}\n", "above 100000"},
        {"root ::= (((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
         "(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
         "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((\"a\")\n", "nested deeper than 256"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dp_err err = {0};
        dp_status st = eng_grammar_check(cases[i].text, strlen(cases[i].text), &err);
        if (st != DP_EFORMAT || !strstr(err.msg, cases[i].want))
            fail_msg("case %zu: status %d, message '%s', wanted '%s'", i, st, err.msg, cases[i].want);
        if (i != 1 && !strstr(err.msg, "line")) fail_msg("case %zu: no line in '%s'", i, err.msg);
    }
}

static void test_sentences(void **state) {
    (void)state;
    struct {
        const char *grammar;
        const char *yes[6], *no[6];
    } cases[] = {
        {"root ::= \"a\" \"b\"* \"c\"", {"ac", "abc", "abbbbc"}, {"", "a", "abcb", "bc"}},
        {"root ::= (\"ab\"){2,3}", {"abab", "ababab"}, {"ab", "abababab", "aba"}},
        {"root ::= [a-c]+ ( \"-\" [0-9]? )?", {"a", "cab", "a-", "a-7"}, {"-", "a-77", "d"}},
        {"root ::= x | y\nx ::= \"x\" root?\ny ::=\n  \"y\"", {"x", "y", "xxy", "xx"}, {"", "yx"}},
        {"root ::= [é-ë] [^a-z] .", {"éAb", "ë€x", "é\xF0\x9F\x98\x80\n"}, {"eAb", "éab", "ê"}},
        {"root ::= \"\\u00e9\\x41\\t\" [\\-\\]]", {"\xC3\xA9" "A\t-", "\xC3\xA9" "A\t]"}, {"\xC3\xA9" "A\t^"}},
        {"root ::= \"\" | \"a\" # comment\n# another\n", {"", "a"}, {"aa"}},
        {"root ::= [\\U0001F600-\\U0001F64F]{1,2}", {"\xF0\x9F\x98\x80", "\xF0\x9F\x99\x8F\xF0\x9F\x98\x80"},
         {"\xF0\x9F\x98", "\xF0\x9F\x9A\x80", "a"}},
        /* 100,000 empty items in a row: one rule with that many "may begin with" edges, which the
         * left-recursion check once walked from the first edge again for each (minutes) */
        {"root ::= ( \"\" ){100000} \"z\"", {"z"}, {"", "zz"}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        eng_grammar *g = compile(cases[i].grammar);
        for (int k = 0; k < 6 && cases[i].yes[k]; k++)
            if (!takes(g, cases[i].yes[k])) fail_msg("grammar %zu refuses '%s'", i, cases[i].yes[k]);
        for (int k = 0; k < 6 && cases[i].no[k]; k++)
            if (takes(g, cases[i].no[k])) fail_msg("grammar %zu takes '%s'", i, cases[i].no[k]);
        eng_grammar_free(g);
    }
    /* a text nested 30,000 deep: the matcher's stacks are that deep, its node arena is compacted
     * on the way (a chain once cut at 4,096 there, ending the text early), and a chain of
     * 1,000 x 1,000 parts that read nothing is walked without recursion */
    eng_grammar *g = compile("root ::= \"[\" root? \"]\"");
    eng_matcher *m;
    assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
    for (int i = 0; i < 30000; i++) assert_true(eng_matcher_accept_bytes(m, "[", 1));
    for (int i = 0; i < 30000; i++) {
        if (eng_matcher_can_end(m)) fail_msg("the text may end after %d of 30000 ']'", i);
        assert_true(eng_matcher_accept_bytes(m, "]", 1));
    }
    assert_true(eng_matcher_must_end(m));
    eng_matcher_free(m);
    eng_grammar_free(g);
    g = compile("root ::= ( ( \"\" ){1000} ){1000} \"z\"");
    if (!takes(g, "z") || takes(g, "")) fail_msg("1000 x 1000 empty parts before 'z'");
    eng_grammar_free(g);
    /* a character cut between two calls (as a token may end inside one) */
    g = compile("root ::= [^a-z]{2}");
    assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
    assert_true(eng_matcher_accept_bytes(m, "\xE2\x82", 2));
    assert_false(eng_matcher_can_end(m));
    assert_false(eng_matcher_accept_bytes(m, "a", 1)); /* refused: the state stays */
    assert_true(eng_matcher_accept_bytes(m, "\xAC" "A", 2));
    assert_true(eng_matcher_must_end(m));
    eng_matcher_free(m);
    eng_grammar_free(g);
}

/* Bit test. */
static bool bit(const uint64_t *m, int32_t i) { return (m[i >> 6] >> (i & 63)) & 1; }

/* The trie walk's mask against eng_matcher_allows for every token, at every step of a text. */
static void check_masks_along(eng_grammar *g, const char *text, bool lead) {
    const int32_t V = eng_tokenizer_n_vocab(g_tok);
    eng_matcher *m;
    assert_int_equal(eng_matcher_new(g, lead, &m, NULL), DP_OK);
    uint64_t *copy = malloc(((size_t)V + 63) / 64 * 8);
    const size_t n = strlen(text);
    for (size_t i = 0;;) {
        memcpy(copy, eng_matcher_mask(m), ((size_t)V + 63) / 64 * 8);
        int32_t allowed = 0;
        for (int32_t t = 0; t < V; t++) {
            const bool a = eng_matcher_allows(m, t);
            allowed += a;
            if (a != bit(copy, t)) {
                const char *p;
                size_t pl = eng_token_to_piece(g_tok, t, true, &p);
                fail_msg("at byte %zu of '%s': token %d '%.*s' allows %d, mask %d", i, text, t, (int)pl, p, a,
                         bit(copy, t));
            }
        }
        if (!allowed) fail_msg("at byte %zu: no token allowed", i);
        /* a second time from the cache: the same */
        assert_memory_equal(copy, eng_matcher_mask(m), ((size_t)V + 63) / 64 * 8);
        if (i == n) break;
        const size_t step = 1 + i % 3 < n - i ? 1 + i % 3 : n - i; /* steps of 1-3 bytes, across characters */
        assert_true(eng_matcher_accept_bytes(m, text + i, step));
        i += step;
    }
    free(copy);
    eng_matcher_free(m);
}

static void test_masks_match_token_by_token(void **state) {
    (void)state;
    eng_grammar *g = compile(k_json);
    check_masks_along(g, "{\"k\xC3\xA9y\": [1, -2.5e3, \"x\\\"\\u00e9\", {\"n\": null}], \"t\": true}", false);
    check_masks_along(g, "\n {\"a\":{}}", true);
    eng_grammar_free(g);
    g = compile("root ::= [^a-z]{1,3} \"end\"");
    check_masks_along(g, "\xE2\x82\xAC\xF0\x9F\x98\x80" "Aend", false);
    eng_grammar_free(g);
}

/* Random logits (the model wants garbage), greedy and sampled: every finished text is JSON. */
static void test_generation_under_json_grammar_parses(void **state) {
    (void)state;
    const int32_t V = eng_tokenizer_n_vocab(g_tok);
    eng_grammar *g = compile(k_json);
    float *l = malloc((size_t)V * sizeof(float));
    uint64_t r = 7;
    int finished = 0;
    for (int run = 0; run < 24; run++) {
        eng_sampler_params sp = eng_sampler_default_params();
        sp.temp = run % 3 == 0 ? 0.0f : 1.0f;
        sp.top_k = run == 1 ? 0 : 40; /* (0 sorts the whole vocabulary: slow, so rarely) */
        sp.seed = (uint64_t)run;
        eng_sampler *s;
        eng_matcher *m;
        assert_int_equal(eng_sampler_new(&sp, V, &s, NULL), DP_OK);
        assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
        char text[8192];
        size_t len = 0;
        bool done = false;
        for (int step = 0; step < 400 && !done; step++) {
            if (eng_matcher_must_end(m)) {
                done = true;
                break;
            }
            for (int32_t i = 0; i < V; i++) l[i] = (float)(tu_rand(&r) >> 40) * (8.0f / 16777216.0f);
            const int32_t t = eng_sampler_sample_masked(s, l, m);
            assert_true(t >= 0);
            assert_true(eng_matcher_allows(m, t));
            assert_true(eng_matcher_accept_token(m, t));
            if (eng_token_is_eog(g_tok, t)) {
                done = true;
                break;
            }
            const char *p;
            size_t pl = eng_token_to_piece(g_tok, t, false, &p);
            assert_true(len + pl < sizeof(text));
            memcpy(text + len, p, pl);
            len += pl;
        }
        text[len] = 0;
        if (done) {
            finished++;
            json_error_t je;
            json_t *j = json_loadb(text, len, 0, &je);
            if (!j || !json_is_object(j)) fail_msg("run %d: not a JSON object: %s (%s)", run, text, je.text);
            json_decref(j);
        }
        eng_sampler_free(s);
        eng_matcher_free(m);
    }
    print_message("%d of 24 random-logit runs finished within 400 tokens\n", finished);
    assert_true(finished >= 3);
    free(l);
    eng_grammar_free(g);
}

/* A model whose output has more rows than the tokenizer has tokens (padding): those rows are
 * never chosen, and nothing past the mask is read. */
static void test_padding_rows_are_never_allowed(void **state) {
    (void)state;
    const int32_t V = eng_tokenizer_n_vocab(g_tok), VP = V + 1000;
    eng_grammar *g = compile(k_json);
    float *l = calloc((size_t)VP, sizeof(float));
    for (int32_t i = V; i < VP; i++) l[i] = 100.0f;
    for (int temp = 0; temp < 2; temp++) {
        eng_sampler_params sp = eng_sampler_default_params();
        sp.temp = (float)temp;
        eng_sampler *s;
        eng_matcher *m;
        assert_int_equal(eng_sampler_new(&sp, VP, &s, NULL), DP_OK);
        assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
        const int32_t t = eng_sampler_sample_masked(s, l, m);
        assert_true(t >= 0 && t < V);
        assert_true(eng_matcher_allows(m, t));
        eng_sampler_free(s);
        eng_matcher_free(m);
    }
    free(l);
    eng_grammar_free(g);
}

/* Thinking first: every token is free until "</think>" (which may come split across tokens), the
 * grammar takes what follows it (white space first is fine), and a refused remainder is refused. */
static void test_free_text_until_the_reasoning_ends(void **state) {
    (void)state;
    eng_grammar *g = compile(k_json);
    eng_matcher *m;
    assert_int_equal(eng_matcher_new_after(g, "</think>", &m, NULL), DP_OK);
    assert_true(eng_matcher_waiting(m));
    assert_false(eng_matcher_must_end(m));
    const char *reasoning = "Let me think: { is not JSON here ]] </thi";
    assert_true(eng_matcher_accept_bytes(m, reasoning, strlen(reasoning)));
    assert_true(eng_matcher_waiting(m));
    for (int32_t t = 0; t < 200; t++) assert_true(eng_matcher_allows(m, t)); /* anything goes */
    assert_true(eng_matcher_accept_bytes(m, "nk>\n\n{\"a\"", strlen("nk>\n\n{\"a\"")));
    assert_false(eng_matcher_waiting(m));
    assert_false(eng_matcher_accept_bytes(m, "x", strlen("x")));
    assert_true(eng_matcher_accept_bytes(m, ": 1}", strlen(": 1}")));
    assert_true(eng_matcher_must_end(m));
    eng_matcher_free(m);
    /* token by token, as a model writes it (the text tokenized plainly) */
    const char *text = "I should answer with an object.</think>\n{\"k\": [true, null]}";
    eng_tokens ids = {0};
    assert_int_equal(eng_tokenize(g_tok, NULL, text, strlen(text), false, false, &ids, NULL), DP_OK);
    assert_int_equal(eng_matcher_new_after(g, "</think>", &m, NULL), DP_OK);
    for (size_t i = 0; i < ids.n; i++) {
        assert_true(eng_matcher_allows(m, ids.ids[i]));
        assert_true(eng_matcher_accept_token(m, ids.ids[i]));
    }
    assert_true(eng_matcher_must_end(m));
    eng_matcher_free(m);
    eng_tokens_free(&ids);
    /* what follows the tag must begin the grammar */
    assert_int_equal(eng_matcher_new_after(g, "</think>", &m, NULL), DP_OK);
    assert_false(eng_matcher_accept_bytes(m, "ok</think>nope", strlen("ok</think>nope")));
    eng_matcher_free(m);
    /* while waiting, masked sampling is plain sampling */
    const int32_t V = eng_tokenizer_n_vocab(g_tok);
    float *l = malloc((size_t)V * sizeof(float));
    uint64_t r = 3;
    for (int32_t i = 0; i < V; i++) l[i] = (float)(tu_rand(&r) >> 40) * (8.0f / 16777216.0f);
    eng_sampler_params sp = eng_sampler_default_params();
    sp.seed = 9;
    eng_sampler *a, *b;
    assert_int_equal(eng_sampler_new(&sp, V, &a, NULL), DP_OK);
    assert_int_equal(eng_sampler_new(&sp, V, &b, NULL), DP_OK);
    assert_int_equal(eng_matcher_new_after(g, "</think>", &m, NULL), DP_OK);
    for (int k = 0; k < 5; k++) assert_int_equal(eng_sampler_sample_masked(a, l, m), eng_sampler_sample(b, l));
    eng_matcher_free(m);
    eng_sampler_free(a);
    eng_sampler_free(b);
    free(l);
    eng_grammar_free(g);
}

/* A grammar that keeps more parses open than the matcher holds ("a"{0,3000} "a"{0,3000} has
 * k + 1 after k a's) is reported as such: the matcher once refused the 2046th 'a' without a word
 * and the masked sampler then drew from what was left (an end token: a text cut short, silently). */
static void test_too_many_open_parses_are_reported(void **state) {
    (void)state;
    eng_grammar *g = compile("root ::= \"a\"{0,3000} \"a\"{0,3000}");
    eng_matcher *m;
    assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
    int taken = 0;
    while (taken < 2100 && eng_matcher_accept_bytes(m, "a", 1))
        taken++;
    assert_true(taken >= 2000 && taken < 2100);
    assert_true(eng_matcher_overflowed(m));
    const int32_t V = eng_tokenizer_n_vocab(g_tok);
    float *l = calloc((size_t)V, sizeof(float));
    eng_sampler_params sp = eng_sampler_default_params();
    eng_sampler *s;
    assert_int_equal(eng_sampler_new(&sp, V, &s, NULL), DP_OK);
    assert_int_equal(eng_sampler_sample_masked(s, l, m), -1);
    assert_non_null(strstr(eng_matcher_failure(m), "more than 2048 parses open"));
    /* greedy too, with "a" (which the grammar allows) the best token */
    int32_t ta = -1;
    for (int32_t t = 0; t < V && ta < 0; t++) {
        const char *p;
        if (eng_token_to_piece(g_tok, t, false, &p) == 1 && p[0] == 'a') ta = t;
    }
    assert_true(ta >= 0);
    l[ta] = 10.0f;
    eng_sampler_params gp = eng_sampler_default_params();
    gp.temp = 0.0f;
    eng_sampler *greedy;
    assert_int_equal(eng_sampler_new(&gp, V, &greedy, NULL), DP_OK);
    assert_int_equal(eng_sampler_sample_masked(greedy, l, m), -1);
    eng_sampler_free(greedy);
    l[ta] = 0.0f;
    eng_matcher_free(m);
    /* below the limit nothing is flagged, and the mask (the same walk) finds no overflow */
    assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
    assert_true(eng_matcher_accept_bytes(m, "aaaaaaaaaa", 10));
    assert_true(eng_sampler_sample_masked(s, l, m) >= 0);
    assert_false(eng_matcher_overflowed(m));
    assert_non_null(strstr(eng_matcher_failure(m), "no token can continue"));
    eng_matcher_free(m);
    eng_sampler_free(s);
    free(l);
    eng_grammar_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors_name_line_and_column),
        cmocka_unit_test(test_sentences),
        cmocka_unit_test(test_masks_match_token_by_token),
        cmocka_unit_test(test_generation_under_json_grammar_parses),
        cmocka_unit_test(test_padding_rows_are_never_allowed),
        cmocka_unit_test(test_free_text_until_the_reasoning_ends),
        cmocka_unit_test(test_too_many_open_parses_are_reported),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
