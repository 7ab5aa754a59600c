/*
 * test_json_schema.c - JSON Schema to grammar: every finished output of random-logit generation
 * (the worst case: the model wants garbage) parses and validates against its schema. The judge
 * is a validator written here from the JSON Schema keywords, on jansson's parse, with POSIX
 * regexec for patterns: another code path than the grammar compiler. Unsupported schemas are
 * refused with the schema path.
 */
#include "testutil.h"

#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "json_schema.h"
#include "platform.h"

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

/* ---- the judge ------------------------------------------------------------------------------- */

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool digits(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

static bool is_date(const char *s) {
    if (strlen(s) < 10 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2)) return false;
    const int m = atoi(s + 5), d = atoi(s + 8);
    return m >= 1 && m <= 12 && d >= 1 && d <= 31;
}

static bool is_time(const char *s) {
    if (!digits(s, 2) || s[2] != ':' || !digits(s + 3, 2) || s[5] != ':' || !digits(s + 6, 2)) return false;
    if (atoi(s) > 23 || atoi(s + 3) > 59 || atoi(s + 6) > 59) return false;
    s += 8;
    if (*s == '.') {
        s++;
        int k = 0;
        while (*s >= '0' && *s <= '9') s++, k++;
        if (!k) return false;
    }
    if (!strcmp(s, "Z")) return true;
    return (*s == '+' || *s == '-') && digits(s + 1, 2) && s[3] == ':' && digits(s + 4, 2) && !s[6] && atoi(s + 1) <= 23 &&
           atoi(s + 4) <= 59;
}

static bool check_format(const char *f, const char *s) {
    if (!strcmp(f, "date")) return strlen(s) == 10 && is_date(s);
    if (!strcmp(f, "time")) return is_time(s);
    if (!strcmp(f, "date-time")) return strlen(s) > 11 && is_date(s) && s[10] == 'T' && is_time(s + 11);
    if (!strcmp(f, "uuid")) {
        if (strlen(s) != 36) return false;
        for (int i = 0; i < 36; i++) {
            const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
            if (dash ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i])) return false;
        }
        return true;
    }
    if (!strcmp(f, "email")) {
        const char *at = strchr(s, '@');
        return at && at > s && strchr(at + 1, '.') && !strchr(at + 1, '@') && at[1] != '.' && s[strlen(s) - 1] != '.';
    }
    return false;
}

static json_t *g_root;

static bool valid(json_t *s, json_t *v, char *why);

static bool fails(char *why, const char *what) {
    snprintf(why, 200, "%s", what);
    return false;
}

static bool valid_type(const char *t, json_t *v) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    return false;
}

static bool valid(json_t *s, json_t *v, char *why) {
    json_t *k;
    if (json_is_true(s)) return true;
    if ((k = json_object_get(s, "$ref"))) {
        const char *r = json_string_value(k);
        json_t *d = !strcmp(r, "#") ? g_root : json_object_get(json_object_get(g_root, "$defs"), r + 8);
        return valid(d, v, why);
    }
    if ((k = json_object_get(s, "const")) && !json_equal(k, v)) return fails(why, "const");
    if ((k = json_object_get(s, "enum"))) {
        bool any = false;
        for (size_t i = 0; i < json_array_size(k); i++) any |= json_equal(json_array_get(k, i), v);
        if (!any) return fails(why, "enum");
    }
    if ((k = json_object_get(s, "anyOf"))) {
        bool any = false;
        for (size_t i = 0; i < json_array_size(k) && !any; i++) any = valid(json_array_get(k, i), v, why);
        if (!any) return fails(why, "anyOf");
    }
    if ((k = json_object_get(s, "oneOf"))) {
        int n = 0;
        for (size_t i = 0; i < json_array_size(k); i++) n += valid(json_array_get(k, i), v, why);
        if (n != 1) return fails(why, "oneOf");
    }
    if ((k = json_object_get(s, "allOf")))
        for (size_t i = 0; i < json_array_size(k); i++)
            if (!valid(json_array_get(k, i), v, why)) return false;
    if ((k = json_object_get(s, "type"))) {
        bool ok = false;
        if (json_is_string(k)) ok = valid_type(json_string_value(k), v);
        for (size_t i = 0; i < json_array_size(k); i++) ok |= valid_type(json_string_value(json_array_get(k, i)), v);
        if (!ok) return fails(why, "type");
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(s, "properties"), *add = json_object_get(s, "additionalProperties");
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val) {
            json_t *ps = json_object_get(props, key);
            if (ps && !valid(ps, val, why)) return false;
            if (!ps && json_is_false(add)) return fails(why, "additionalProperties");
            if (!ps && json_is_object(add) && !valid(add, val, why)) return false;
        }
        json_t *req = json_object_get(s, "required");
        for (size_t i = 0; i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i)))) return fails(why, "required");
    }
    if (json_is_array(v)) {
        json_t *pre = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *e = json_array_get(v, i);
            if (i < json_array_size(pre)) {
                if (!valid(json_array_get(pre, i), e, why)) return false;
            } else if (json_is_false(items)) {
                return fails(why, "items false");
            } else if (json_is_object(items) && !valid(items, e, why)) {
                return false;
            }
        }
        if ((k = json_object_get(s, "minItems")) && json_array_size(v) < (size_t)json_integer_value(k)) return fails(why, "minItems");
        if ((k = json_object_get(s, "maxItems")) && json_array_size(v) > (size_t)json_integer_value(k)) return fails(why, "maxItems");
    }
    if (json_is_string(v)) {
        const char *t = json_string_value(v);
        if ((k = json_object_get(s, "minLength")) && utf8_chars(t) < (size_t)json_integer_value(k)) return fails(why, "minLength");
        if ((k = json_object_get(s, "maxLength")) && utf8_chars(t) > (size_t)json_integer_value(k)) return fails(why, "maxLength");
        if ((k = json_object_get(s, "format")) && !check_format(json_string_value(k), t)) return fails(why, "format");
        if ((k = json_object_get(s, "pattern"))) {
            regex_t re;
            assert_int_equal(regcomp(&re, json_string_value(k), REG_EXTENDED | REG_NOSUB), 0);
            const int r = regexec(&re, t, 0, NULL, 0);
            regfree(&re);
            if (r) return fails(why, "pattern");
        }
    }
    if (json_is_number(v)) {
        const double x = json_number_value(v);
        if ((k = json_object_get(s, "minimum")) && x < json_number_value(k)) return fails(why, "minimum");
        if ((k = json_object_get(s, "maximum")) && x > json_number_value(k)) return fails(why, "maximum");
        if ((k = json_object_get(s, "exclusiveMinimum")) && x <= json_number_value(k)) return fails(why, "exclusiveMinimum");
        if ((k = json_object_get(s, "exclusiveMaximum")) && x >= json_number_value(k)) return fails(why, "exclusiveMaximum");
    }
    return true;
}

/* ---- the suite --------------------------------------------------------------------------------- */

static const char *const k_schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
    "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},\"x\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},"
    "\"z\":{\"type\":\"null\"}},\"required\":[\"n\",\"x\",\"b\",\"z\"]}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"boolean\"}}}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"}},"
    "\"required\":[\"c\"]}",
    "{\"type\":\"object\",\"properties\":{\"s\":{\"enum\":[\"low\",\"medium\",\"high\"]},\"k\":{\"const\":\"v1\"}},\"required\":[\"s\",\"k\"]}",
    "{\"enum\":[1,\"two\",null,true,{\"x\":[1,2]},[3]]}",
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":4}",
    "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\",\"maxLength\":3},{\"type\":\"boolean\"}],\"items\":false,\"minItems\":1}",
    "{\"type\":\"array\",\"prefixItems\":[{\"const\":\"head\"}],\"items\":{\"type\":\"null\"},\"maxItems\":3}",
    "{\"type\":\"object\",\"properties\":{\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":"
    "{\"id\":{\"type\":\"integer\",\"minimum\":1},\"name\":{\"type\":\"string\",\"maxLength\":8}},\"required\":[\"id\",\"name\"]},"
    "\"maxItems\":3}},\"required\":[\"items\"]}",
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},"
    "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},\"required\":[\"v\"]}},"
    "\"$ref\":\"#/$defs/node\"}",
    "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}},"
    "\"required\":[\"v\",\"next\"]}",
    "{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-[0-9]{3,5}$\"}",
    "{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?( and (cat|dog)s?)*$\"}",
    "{\"type\":\"string\",\"pattern\":\"ab+c\"}",
    "{\"type\":\"string\",\"pattern\":\"^[^a-z ]+\\\\.txt$\"}",
    "{\"type\":\"string\",\"format\":\"date\"}",
    "{\"type\":\"string\",\"format\":\"time\"}",
    "{\"type\":\"string\",\"format\":\"date-time\"}",
    "{\"type\":\"string\",\"format\":\"uuid\"}",
    "{\"type\":\"string\",\"format\":\"email\"}",
    "{\"type\":\"string\",\"minLength\":3,\"maxLength\":6}",
    "{\"type\":\"integer\",\"minimum\":-120,\"maximum\":4500}",
    "{\"type\":\"integer\",\"exclusiveMinimum\":7,\"exclusiveMaximum\":1000}",
    "{\"type\":\"integer\",\"minimum\":37}",
    "{\"type\":\"integer\",\"maximum\":-5}",
    "{\"type\":\"number\",\"minimum\":0}",
    "{\"type\":[\"string\",\"null\"],\"maxLength\":4}",
    "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},\"n\":{\"type\":\"integer\"}},\"required\":[\"kind\",\"n\"]},"
    "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"b\"},\"s\":{\"type\":\"string\",\"maxLength\":5}},\"required\":[\"kind\",\"s\"]}]}",
    "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":5},{\"type\":\"boolean\"}]}",
    "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
    "{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}]}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"boolean\"}}",
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"idx\":{\"type\":\"string\"}},\"additionalProperties\":{\"type\":\"null\"}}",
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":3}}",
    "{\"type\":\"object\"}",
    "{}",
    "{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"date-time\"},\"who\":{\"type\":\"string\",\"format\":\"email\"},"
    "\"id\":{\"type\":\"string\",\"format\":\"uuid\"}},\"required\":[\"when\",\"who\",\"id\"]}",
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"file\":{\"type\":\"string\",\"maxLength\":12},\"line\":{\"type\":\"integer\","
    "\"minimum\":1},\"severity\":{\"enum\":[\"info\",\"warning\",\"error\"]},\"category\":{\"type\":\"string\",\"maxLength\":10},"
    "\"message\":{\"type\":\"string\",\"maxLength\":20},\"suggestion\":{\"type\":[\"string\",\"null\"],\"maxLength\":10}},"
    "\"required\":[\"file\",\"line\",\"severity\",\"category\",\"message\",\"suggestion\"],\"additionalProperties\":false},\"maxItems\":2}",
    "{\"type\":\"object\",\"properties\":{\"t\":{\"type\":\"string\",\"pattern\":\"^\\\"q\\\\\\\\[0-9]\\\"$\"}},\"required\":[\"t\"]}",
    "{\"type\":\"object\",\"properties\":{\"émoji\":{\"type\":\"string\",\"maxLength\":2},\"日本\":{\"type\":\"integer\"}},\"required\":[\"émoji\",\"日本\"]}",
    "{\"type\":\"object\",\"title\":\"x\",\"description\":\"d\",\"properties\":{\"a\":{\"type\":\"integer\",\"description\":\"the a\",\"default\":3}},"
    "\"required\":[\"a\"]}",
    "{\"definitions\":{\"leaf\":{\"type\":\"string\",\"maxLength\":3}},\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/leaf\"},\"maxItems\":3}",
    /* repetitions next to parts that can be empty, and a bounded one of such a part */
    "{\"type\":\"string\",\"pattern\":\"^(a?b)*(c|d|){0,3}x*$\"}",
    /* definitions whose names differ only in punctuation (they once shared one rule) */
    "{\"$defs\":{\"user_id\":{\"type\":\"integer\"},\"user-id\":{\"type\":\"string\",\"maxLength\":4}},"
    "\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/user_id\"},\"b\":{\"$ref\":\"#/$defs/user-id\"}},"
    "\"required\":[\"a\",\"b\"]}",
};

/* Generates under the grammar with pooled random logits; returns whether it finished and the text. */
static bool generate(eng_grammar *g, const float *pool, int32_t V, uint64_t *r, float temp, char *text, size_t cap) {
    eng_sampler_params sp = eng_sampler_default_params();
    sp.temp = temp;
    sp.seed = *r;
    eng_sampler *s;
    eng_matcher *m;
    assert_int_equal(eng_sampler_new(&sp, V, &s, NULL), DP_OK);
    assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
    size_t len = 0;
    bool done = false;
    for (int step = 0; step < 300 && !done; step++) {
        if (eng_matcher_must_end(m)) {
            done = true;
            break;
        }
        const float *l = pool + tu_rand(r) % (uint64_t)V;
        const int32_t t = eng_sampler_sample_masked(s, l, m);
        assert_true(t >= 0);
        assert_true(eng_matcher_accept_token(m, t));
        if (eng_token_is_eog(g_tok, t)) {
            done = true;
            break;
        }
        const char *p;
        size_t pl = eng_token_to_piece(g_tok, t, false, &p);
        if (len + pl >= cap) break;
        memcpy(text + len, p, pl);
        len += pl;
    }
    text[len] = 0;
    eng_sampler_free(s);
    eng_matcher_free(m);
    return done;
}

static void test_every_finished_output_validates(void **state) {
    (void)state;
    const size_t n = sizeof(k_schemas) / sizeof(k_schemas[0]);
    assert_true(n >= 40);
    const int32_t V = eng_tokenizer_n_vocab(g_tok);
    float *pool = malloc((size_t)V * 2 * sizeof(float));
    uint64_t r = 5;
    for (int32_t i = 0; i < 2 * V; i++) pool[i] = (float)(tu_rand(&r) >> 40) * (6.0f / 16777216.0f);
    char *text = malloc(65536);
    int schemas_finished = 0, outputs = 0;
    for (size_t i = 0; i < n; i++) {
        dp_buf gb;
        dp_buf_init(&gb, 1 << 24);
        dp_err err = {0};
        if (pl_schema_to_gbnf(k_schemas[i], strlen(k_schemas[i]), &gb, &err)) fail_msg("schema %zu: %s", i, err.msg);
        eng_grammar *g;
        if (eng_grammar_compile(g_tok, (const char *)gb.data, gb.len, &g, &err))
            fail_msg("schema %zu: %s\n%s", i, err.msg, (const char *)gb.data);
        json_error_t je;
        json_t *schema = json_loads(k_schemas[i], 0, &je);
        g_root = schema;
        int fin = 0;
        for (int run = 0; run < 6; run++) {
            if (!generate(g, pool, V, &r, run % 2 ? 1.0f : 0.0f, text, 65536)) continue;
            fin++;
            outputs++;
            json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
            if (!v) fail_msg("schema %zu run %d: not JSON (%s): %s", i, run, je.text, text);
            char why[200] = "";
            if (!valid(schema, v, why)) fail_msg("schema %zu run %d: invalid (%s): %s", i, run, why, text);
            json_decref(v);
        }
        schemas_finished += fin > 0;
        json_decref(schema);
        eng_grammar_free(g);
        dp_buf_free(&gb);
    }
    print_message("%d finished outputs, all valid; %d of %zu schemas had at least one\n", outputs, schemas_finished, n);
    assert_true(schemas_finished >= (int)n * 3 / 4);
    free(text);
    free(pool);
}

static void test_unsupported_is_refused_with_the_path(void **state) {
    (void)state;
    struct {
        const char *schema, *want;
    } cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"multipleOf\":3}}}", "/properties/a: the keyword 'multipleOf'"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\",\"format\":\"ipv4\"}}", "/items: format 'ipv4'"},
        {"{\"type\":\"string\",\"pattern\":\"(?=a)b\"}", "look-arounds"},
        {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "not supported"},
        {"{\"$ref\":\"#/$defs/missing\"}", "$ref"},
        {"{\"type\":\"number\",\"maximum\":3.5}", "bounds on a number"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "'b'"},
        {"{\"type\":\"frog\"}", "unknown type 'frog'"},
        {"{\"type\":\"object\",\"maxProperties\":2}", "maxProperties"},
        {"{\"type\":\"object\",\"properties\":{\"a\":1}}", "/properties/a: a schema must be"},
        {"[1,2", "not JSON"},
        {"{\"type\":\"string\",\"pattern\":\"ab\\\\\"}", "a '\\' at the end of the pattern"},
        /* counts the grammar would refuse, caught here (they reached users as a compiler bug) */
        {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{}2$\"}", "a '{' that is not a {m}, {m,} or {m,n} count"},
        {"{\"type\":\"string\",\"pattern\":\"a{,5}\"}", "a '{' that is not a {m}, {m,} or {m,n} count"},
        {"{\"type\":\"string\",\"pattern\":\"a{3,1}\"}", "n < m"},
        {"{\"type\":\"string\",\"pattern\":\"a{100001}\"}", "a count above 100000"},
        /* an unbounded repetition of a part that can be empty (the grammar would be left-recursive) */
        {"{\"type\":\"string\",\"pattern\":\"^(\\\\d{0}|x)+$\"}", "a repetition (*, + or {m,}) of a part that can match nothing"},
        {"{\"type\":\"string\",\"pattern\":\"(a|b|)*c\"}", "a repetition (*, + or {m,}) of a part that can match nothing"},
        {"{\"type\":\"string\",\"pattern\":\"(a?b?){2,}\"}", "a repetition (*, + or {m,}) of a part that can match nothing"},
        {"{\"type\":\"string\",\"pattern\":\"[a-\\\\\"}", "a '\\' at the end of the pattern"},
        /* recursion that reads nothing first: no finite text is valid, the grammar would be left-recursive */
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}",
         "/$defs/b: $ref '#/$defs/a' leads back to itself without reading anything"},
        {"{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#\"}]}", "/anyOf/1: $ref '#' leads back to itself"},
        {"{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/x\"},\"$defs\":{\"x\":{\"oneOf\":[{\"type\":\"integer\"},"
         "{\"$ref\":\"#/$defs/x\"}]}}}", "/$defs/x/oneOf/1: $ref '#/$defs/x' leads back"},
        /* the same through a definition first written inside an array ('#' -> a at its start, and
         * a -> '#' at its start through oneOf) */
        {"{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"oneOf\":[{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}},"
         "{\"$ref\":\"#\"}]}}}", "/$defs/a/oneOf/1: $ref '#' leads back"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dp_buf gb;
        dp_buf_init(&gb, 1 << 20);
        dp_err err = {0};
        if (!pl_schema_to_gbnf(cases[i].schema, strlen(cases[i].schema), &gb, &err)) fail_msg("case %zu accepted", i);
        if (!strstr(err.msg, cases[i].want)) fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].want);
        dp_buf_free(&gb);
    }
}

/* The answer of a result line, and whether it finished ("stop"). */
static const char *answer(json_t *o, bool *stop) {
    json_t *ch = json_array_get(json_object_get(json_object_get(json_object_get(o, "response"), "body"), "choices"), 0);
    *stop = !strcmp(json_string_value(json_object_get(ch, "finish_reason")) ?: "", "stop");
    return json_string_value(json_object_get(json_object_get(ch, "message"), "content"));
}

/* Validates every finished answer of a results file against schema k_schemas[index] where index
 * comes from the custom_id "s<index>-..."; returns custom_id -> answer|finish for comparisons. */
static json_t *check_results(const char *path, int *finished) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    json_t *texts = json_object();
    char *line = malloc(1 << 20);
    while (fgets(line, 1 << 20, f)) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        const char *cid = json_string_value(json_object_get(o, "custom_id"));
        if (json_is_object(json_object_get(o, "error")))
            fail_msg("%s: an error record: %s", cid, json_string_value(json_object_get(json_object_get(o, "error"), "message")));
        size_t i = 0;
        const char *sidx = strstr(cid, "s");
        if (sidx) i = strtoul(sidx + 1, NULL, 10);
        bool stop;
        const char *a = answer(o, &stop);
        char key[512];
        snprintf(key, sizeof(key), "%s|%d", a ? a : "?", stop);
        json_object_set_new(texts, cid, json_string(key));
        if (stop) {
            json_t *schema = json_loads(k_schemas[i], 0, NULL), *v = json_loads(a, JSON_DECODE_ANY, NULL);
            char why[200] = "";
            g_root = schema;
            if (!v) fail_msg("%s: not JSON: %s", cid, a);
            if (!valid(schema, v, why)) fail_msg("%s: invalid (%s): %s", cid, why, a);
            (*finished)++;
            json_decref(v);
            json_decref(schema);
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    return texts;
}

static void sh(const char *cmd) {
    const int rc = system(cmd);
    if (rc) fail_msg("'%s' exited %d", cmd, rc);
}

/* The suite through the commands users run: every schema as batch requests (sampled and greedy)
 * and as a job's schema_file; every finished answer validates, and a batch's texts are the same
 * with 1 and 8 sequences at once. */
static void test_suite_through_batch_and_run(void **state) {
    (void)state;
    const size_t n = sizeof(k_schemas) / sizeof(k_schemas[0]);
    char model[512], in[512], out[2][512];
    snprintf(model, sizeof(model), "%s", tu_tmp("suite.gguf"));
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen35 --out '%s'", model), 0);
    snprintf(in, sizeof(in), "%s", tu_tmp("suite.jsonl"));
    FILE *f = fopen(in, "w");
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            json_t *rf = json_pack("{s:s, s:{s:s, s:b, s:o}}", "type", "json_schema", "json_schema", "name", "s",
                                   "strict", 1, "schema", json_loads(k_schemas[i], 0, NULL));
            /* top_k 40: without it the sampler sorts the whole vocabulary every step (slow under ASan) */
            json_t *req = json_pack("{s:s, s:s, s:{s:[{s:s, s:s}], s:i, s:f, s:i, s:i, s:o}}", "custom_id", "", "url",
                                    "/v1/chat/completions", "body", "messages", "role", "user", "content",
                                    "Fill the form.", "max_tokens", 96, "temperature", k ? 1.0 : 0.0, "top_k", 40,
                                    "seed", k, "response_format", rf);
            char cid[32];
            snprintf(cid, sizeof(cid), "s%zu-%d", i, k);
            json_object_set_new(req, "custom_id", json_string(cid));
            char *line = json_dumps(req, JSON_COMPACT);
            fprintf(f, "%s\n", line);
            free(line);
            json_decref(req);
        }
    fclose(f);
    json_t *texts[2];
    int finished = 0;
    for (int b = 0; b < 2; b++) {
        snprintf(out[b], sizeof(out[b]), "%s", tu_tmp(b ? "suite8.jsonl" : "suite1.jsonl"));
        const int rc = tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --seqs %d -c 512 -t 2", model, in, out[b], b ? 8 : 1);
        if (rc) fail_msg("docpipe batch exited %d: %s", rc, tu_last_stderr());
        texts[b] = check_results(out[b], &finished);
    }
    if (!json_equal(texts[0], texts[1])) fail_msg("the batch's texts differ between --seqs 1 and --seqs 8");
    json_decref(texts[0]);
    json_decref(texts[1]);
    print_message("docpipe batch: %d finished answers of %zu schemas, all valid, the same with 1 and 8 at once\n",
                  finished / 2, n);
    assert_true(finished / 2 >= (int)n);
    /* docpipe run: each schema as a job's schema_file over two documents */
    char d[512]; /* (tu_tmp's buffers rotate) */
    snprintf(d, sizeof(d), "%s", tu_tmp("suite-run"));
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/in' && printf 'first document' > '%s/in/a.txt' && printf 'second' > '%s/in/b.txt'",
             d, d, d);
    sh(cmd);
    int run_finished = 0;
    for (size_t i = 0; i < n; i++) {
        char path[600], job[600], res[600];
        snprintf(path, sizeof(path), "%s/schema.json", d);
        tu_write_file(path, k_schemas[i], strlen(k_schemas[i]));
        snprintf(job, sizeof(job), "%s/job.yaml", d);
        f = fopen(job, "w");
        fprintf(f, "model: {path: '%s', context: 512, threads: 2, max_sequences: 2}\ninputs: [{path: in}]\n"
                   "prompts: {template: 'Fill the form for {{content}}'}\n"
                   "generation:\n  max_tokens: 96\n  temperature: 0.8\n  seed: %zu\n"
                   "  response_format: {type: json_schema, json_schema: {name: s, schema_file: schema.json}}\n"
                   "outputs: {jsonl: out/r.jsonl}\n", model, i);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s/out' '%s/state'", d, d);
        sh(cmd);
        const int rc = tu_run(NULL, "run '%s' --quiet", job);
        if (rc) fail_msg("schema %zu: docpipe run exited %d: %s", i, rc, tu_last_stderr());
        /* rename the custom ids so check_results finds the schema: s<i>-<id> */
        snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
        snprintf(cmd, sizeof(cmd), "sed -i 's/\"custom_id\": *\"/\"custom_id\":\"s%zu-/' '%s'", i, res);
        sh(cmd);
        json_decref(check_results(res, &run_finished));
    }
    print_message("docpipe run: %d finished answers over %zu schemas, all valid\n", run_finished, n);
    assert_true(run_finished >= (int)n);
}

/* Integer ranges are exact: every integer near the bounds (and around powers of ten) is taken
 * if and only if it lies in the range, written without leading zeros. */
static bool grammar_takes(eng_grammar *g, const char *text) {
    eng_matcher *m;
    assert_int_equal(eng_matcher_new(g, false, &m, NULL), DP_OK);
    const bool ok = eng_matcher_accept_bytes(m, text, strlen(text)) && eng_matcher_can_end(m);
    eng_matcher_free(m);
    return ok;
}

static void test_integer_ranges_are_exact(void **state) {
    (void)state;
    const long long cases[][2] = {{1, 500}, {-120, 4500}, {0, 0}, {7, 7}, {-99, -10}, {10, 10000}, {37, -1}, {-1, -5},
                                  {19, 1234567}, {-3000, 3000}, {100, 199}, {0, 9999999999LL}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const long long lo = cases[i][0], hi = cases[i][1];
        const bool has_hi = !(hi == -1 && lo > 0), has_lo = !(lo == -1 && hi == -5);
        char schema[200];
        if (!has_lo) snprintf(schema, sizeof(schema), "{\"type\":\"integer\",\"maximum\":%lld}", hi);
        else if (!has_hi) snprintf(schema, sizeof(schema), "{\"type\":\"integer\",\"minimum\":%lld}", lo);
        else snprintf(schema, sizeof(schema), "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", lo, hi);
        dp_buf gb;
        dp_buf_init(&gb, 1 << 24);
        dp_err err = {0};
        assert_int_equal(pl_schema_to_gbnf(schema, strlen(schema), &gb, &err), DP_OK);
        eng_grammar *g;
        assert_int_equal(eng_grammar_compile(g_tok, (const char *)gb.data, gb.len, &g, &err), DP_OK);
        long long probes[400];
        int np = 0;
        const long long anchors[] = {lo, hi, 0, 9, 10, 99, 100, 999, 1000, 9999, 10000, 99999, 100000, 1234567, 9999999999LL};
        for (size_t k = 0; k < sizeof(anchors) / sizeof(anchors[0]); k++)
            for (long long d = -3; d <= 3; d++) probes[np++] = anchors[k] + d, probes[np++] = -(anchors[k] + d);
        for (int k = 0; k < np; k++) {
            const long long x = probes[k];
            const bool in = (!has_lo || x >= lo) && (!has_hi || x <= hi);
            char t[32];
            snprintf(t, sizeof(t), "%lld", x);
            if (grammar_takes(g, t) != in) fail_msg("%s: %s is %s", schema, t, in ? "refused" : "taken");
        }
        assert_false(grammar_takes(g, "007"));
        assert_false(grammar_takes(g, "-0"));
        eng_grammar_free(g);
        dp_buf_free(&gb);
    }
}

/* An 8 KB schema compiles (schema to grammar to program) in well under a second. */
static void test_large_schema_compiles(void **state) {
    (void)state;
    dp_buf s;
    dp_buf_init(&s, 1 << 20);
    dp_buf_printf(&s, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; s.len < 8000; i++)
        dp_buf_printf(&s, "%s\"field_%d\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},"
                      "\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":%d}},\"required\":[\"name\"]}", i ? "," : "", i, 100 + i);
    dp_buf_printf(&s, "}}");
    dp_buf gb;
    dp_buf_init(&gb, 1 << 24);
    dp_err err = {0};
    eng_grammar *g;
    assert_int_equal(eng_grammar_compile(g_tok, "root ::= \"x\"", 12, &g, &err), DP_OK); /* the trie, once */
    eng_grammar_free(g);
    const uint64_t t0 = dp_time_ns();
    assert_int_equal(pl_schema_to_gbnf((const char *)s.data, s.len, &gb, &err), DP_OK);
    assert_int_equal(eng_grammar_compile(g_tok, (const char *)gb.data, gb.len, &g, &err), DP_OK);
    print_message("a %zu-byte schema: %zu bytes of grammar, compiled in %.2f ms\n", s.len, gb.len,
                  (double)(dp_time_ns() - t0) / 1e6);
    eng_grammar_free(g);
    dp_buf_free(&gb);
    dp_buf_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_finished_output_validates),
        cmocka_unit_test(test_unsupported_is_refused_with_the_path),
        cmocka_unit_test(test_integer_ranges_are_exact),
        cmocka_unit_test(test_suite_through_batch_and_run),
        cmocka_unit_test(test_large_schema_compiles),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
