/*
 * job_yaml.c - libyaml event stream -> job_node tree (see job_yaml.h).
 *
 * DESIGN: an explicit stack of open collections instead of recursion, so depth is checked
 * before it is used; libyaml's own errors are reported with its problem mark. Debian 12's
 * libyaml 0.2.5 has no nesting limit of its own (docs/testing.md, hostile YAML), hence ours.
 */
#include "job_yaml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static job_node *node_new(job_node_kind k, const yaml_mark_t *m) {
    job_node *n = calloc(1, sizeof(*n));
    if (n) {
        n->kind = k;
        n->line = (int)m->line + 1;
        n->col = (int)m->column + 1;
    }
    return n;
}

void job_node_free(job_node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) job_node_free(n->items[i]);
    free(n->items);
    free(n->text);
    free(n);
}

static bool node_push(job_node *parent, job_node *child) {
    job_node **p = realloc(parent->items, (parent->n + 1) * sizeof(*p));
    if (!p) return false;
    parent->items = p;
    parent->items[parent->n++] = child;
    return true;
}

dp_status job_yaml_parse(const char *data, size_t len, const char *name, job_node **out, dp_err *err) {
    *out = NULL;
    if (len > JOB_YAML_MAX_BYTES)
        return dp_err_set(err, DP_EFORMAT, "%s: the job file is %zu bytes; the limit is %u", name, len,
                          JOB_YAML_MAX_BYTES);
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return dp_err_set(err, DP_ENOMEM, "%s: cannot start the YAML parser", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
    job_node *stack[JOB_YAML_MAX_DEPTH + 1];
    int depth = 0, docs = 0;
    size_t n_nodes = 0;
    job_node *root = NULL;
    dp_status st = DP_OK;
    bool done = false;
    while (!done && !st) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            st = dp_err_set(err, DP_EFORMAT, "%s:%zu:%zu: YAML syntax error: %s%s%s", name, p.problem_mark.line + 1,
                            p.problem_mark.column + 1, p.problem ? p.problem : "unknown problem",
                            p.context ? " " : "", p.context ? p.context : "");
            break;
        }
        const yaml_mark_t *m = &ev.start_mark;
        job_node *n = NULL;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = true; break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                st = dp_err_set(err, DP_EFORMAT, "%s:%zu:%zu: a job file holds one YAML document", name, m->line + 1,
                                m->column + 1);
            break;
        case YAML_ALIAS_EVENT:
            st = dp_err_set(err, DP_EFORMAT, "%s:%zu:%zu: aliases (*%s) are not allowed in job files", name,
                            m->line + 1, m->column + 1, (const char *)ev.data.alias.anchor);
            break;
        case YAML_SCALAR_EVENT:
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT: {
            const yaml_char_t *anchor = ev.type == YAML_SCALAR_EVENT ? ev.data.scalar.anchor
                                      : ev.type == YAML_MAPPING_START_EVENT ? ev.data.mapping_start.anchor
                                                                            : ev.data.sequence_start.anchor;
            if (anchor) {
                st = dp_err_set(err, DP_EFORMAT, "%s:%zu:%zu: anchors (&%s) are not allowed in job files", name,
                                m->line + 1, m->column + 1, (const char *)anchor);
                break;
            }
            if (++n_nodes > JOB_YAML_MAX_NODES) {
                st = dp_err_set(err, DP_EFORMAT, "%s:%zu:%zu: more than %d values in the job file", name, m->line + 1,
                                m->column + 1, JOB_YAML_MAX_NODES);
                break;
            }
            if (ev.type == YAML_SCALAR_EVENT) {
                n = node_new(JOB_NODE_SCALAR, m);
                if (n) {
                    n->len = ev.data.scalar.length;
                    n->text = malloc(n->len + 1);
                    if (n->text) {
                        memcpy(n->text, ev.data.scalar.value, n->len);
                        n->text[n->len] = '\0';
                    }
                    n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                }
                if (!n || !n->text) {
                    job_node_free(n);
                    n = NULL;
                    st = dp_err_set(err, DP_ENOMEM, "%s: out of memory", name);
                    break;
                }
            } else {
                if (depth >= JOB_YAML_MAX_DEPTH) {
                    st = dp_err_set(err, DP_EFORMAT, "%s:%zu:%zu: nesting deeper than %d levels", name, m->line + 1,
                                    m->column + 1, JOB_YAML_MAX_DEPTH);
                    break;
                }
                n = node_new(ev.type == YAML_MAPPING_START_EVENT ? JOB_NODE_MAP : JOB_NODE_SEQ, m);
                if (!n) {
                    st = dp_err_set(err, DP_ENOMEM, "%s: out of memory", name);
                    break;
                }
            }
            /* a mapping's keys sit at even positions: only plain text may be a key ("? [a]: b" and
             * "? {a: b}: c" are valid YAML but never a job key) */
            if (depth > 0 && stack[depth - 1]->kind == JOB_NODE_MAP && stack[depth - 1]->n % 2 == 0 &&
                n->kind != JOB_NODE_SCALAR) {
                st = dp_err_set(err, DP_EFORMAT, "%s:%zu:%zu: a key must be plain text, not a %s", name, m->line + 1,
                                m->column + 1, n->kind == JOB_NODE_MAP ? "mapping" : "list");
                job_node_free(n);
                n = NULL;
                break;
            }
            if (depth == 0) {
                if (root) job_node_free(root);
                root = n;
            } else if (!node_push(stack[depth - 1], n)) {
                job_node_free(n);
                st = dp_err_set(err, DP_ENOMEM, "%s: out of memory", name);
                break;
            }
            if (ev.type != YAML_SCALAR_EVENT) stack[depth++] = n;
            break;
        }
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT: depth--; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    if (st) {
        job_node_free(root);
        return st;
    }
    *out = root;
    return DP_OK;
}
