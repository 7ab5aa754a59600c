/*
 * job_yaml.h - a small YAML tree with source positions, built from libyaml events.
 *
 * Job files are plain data: mappings, sequences and scalars. Anchors, aliases and more than
 * one document are refused (an alias bomb cannot expand), nesting is capped, and every node
 * remembers its line and column for error messages.
 */
#ifndef JOB_YAML_H
#define JOB_YAML_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

#define JOB_YAML_MAX_DEPTH 16
#define JOB_YAML_MAX_NODES 100000
#define JOB_YAML_MAX_BYTES (4u << 20)

typedef enum job_node_kind { JOB_NODE_SCALAR, JOB_NODE_MAP, JOB_NODE_SEQ } job_node_kind;

typedef struct job_node {
    job_node_kind kind;
    int line, col;             /* 1-based */
    char *text;                /* SCALAR: NUL-terminated value */
    size_t len;
    bool plain;                /* SCALAR: unquoted (so `null`, `true`, numbers are meaningful) */
    struct job_node **items;   /* MAP: key, value, key, value...; SEQ: values */
    size_t n;
} job_node;

/* Parses one YAML document. name is used in messages. Free with job_node_free(). */
dp_status job_yaml_parse(const char *data, size_t len, const char *name, job_node **out, dp_err *err);
void job_node_free(job_node *n);

#endif /* JOB_YAML_H */
