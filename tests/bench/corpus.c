/*
 * corpus.c - see corpus.h. English: sentences of 6-20 words from a 230-word list with commas,
 * numbers, capitals and paragraph breaks. Chinese: sentences of 8-30 characters from 600 common
 * characters with ，。！？ and paragraph breaks. Code: C and Python functions with random
 * identifiers, indentation, comments and string literals.
 */
#include "corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_en[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not", "he",
    "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were", "their",
    "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so",
    "no", "she", "other", "its", "may", "these", "about", "into", "than", "them", "only", "some", "time", "new",
    "also", "two", "first", "any", "like", "our", "what", "over", "such", "most", "after", "document", "summary",
    "report", "data", "file", "model", "system", "operations", "team", "quarterly", "revenue", "customer",
    "incident", "deployment", "service", "latency", "database", "migration", "release", "schedule", "budget",
    "analysis", "results", "meeting", "decision", "review", "security", "network", "storage", "capacity",
    "performance", "improvement", "requirements", "feedback", "production", "environment", "monitoring", "alert",
    "configuration", "infrastructure", "pipeline", "batch", "processing", "throughput", "reliability", "backup",
    "recovery", "failure", "morning", "evening", "weekly", "department", "manager", "engineer", "contract",
    "invoice", "payment", "supplier", "inventory", "warehouse", "shipment", "delivery", "quality", "standard",
    "policy", "compliance", "audit", "risk", "strategy", "market", "growth", "product", "feature", "design",
    "interface", "version", "update", "support", "request", "response", "error", "warning", "message", "user",
    "account", "access", "permission", "password", "server", "cluster", "node", "memory", "processor", "disk",
    "because", "however", "therefore", "although", "during", "between", "without", "within", "across", "through",
    "increase", "decrease", "improve", "reduce", "measure", "compare", "estimate", "approve", "complete",
    "continue", "describe", "explain", "include", "provide", "require", "suggest", "discuss", "prepare",
    "important", "significant", "additional", "available", "different", "possible", "current", "previous",
    "following", "several", "various", "recent", "annual", "critical", "minor", "major", "final", "initial",
    "Monday", "Friday", "January", "October", "London", "Shanghai", "Berlin", "Tokyo", "Google", "Microsoft",
};

static const char k_zh[] =
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天"
    "而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与"
    "高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东"
    "政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张"
    "活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接"
    "它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言"
    "权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令"
    "黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校"
    "读志飞观争究包组造落视济喜离虽坏兴档报告总结模型系统数据文件运营团队季度收入客户事故部署服务延迟迁移发布计划预算";

typedef struct sb {
    char *p;
    size_t n, cap;
} sb;

static void put(sb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        while (b->n + n + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 1 << 20;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void puts_(sb *b, const char *s) { put(b, s, strlen(s)); }

static uint64_t rnd(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void english(sb *b, size_t target, uint64_t *s) {
    const size_t nw = sizeof(k_en) / sizeof(k_en[0]);
    size_t end = b->n + target;
    while (b->n < end) {
        int words = 6 + (int)(rnd(s) % 15);
        for (int w = 0; w < words; w++) {
            const char *word = k_en[rnd(s) % nw];
            char buf[64];
            if (w == 0) {
                snprintf(buf, sizeof(buf), "%s", word);
                if (buf[0] >= 'a' && buf[0] <= 'z') buf[0] = (char)(buf[0] - 32);
                puts_(b, buf);
            } else {
                put(b, " ", 1);
                if (rnd(s) % 23 == 0) {
                    snprintf(buf, sizeof(buf), "%u", (unsigned)(rnd(s) % 100000));
                    puts_(b, buf);
                } else {
                    puts_(b, word);
                }
            }
            if (w + 1 < words && rnd(s) % 9 == 0) put(b, ",", 1);
        }
        const char *ends[] = {". ", ". ", ". ", "? ", "! ", ".\n\n", ".\n"};
        puts_(b, ends[rnd(s) % 7]);
    }
}

static void chinese(sb *b, size_t target, uint64_t *s) {
    const size_t nc = (sizeof(k_zh) - 1) / 3; /* all 3-byte characters */
    size_t end = b->n + target;
    while (b->n < end) {
        int chars = 8 + (int)(rnd(s) % 23);
        for (int c = 0; c < chars; c++) {
            put(b, k_zh + 3 * (rnd(s) % nc), 3);
            if (c + 1 < chars && rnd(s) % 11 == 0) puts_(b, "，");
            if (rnd(s) % 40 == 0) {
                char num[16];
                snprintf(num, sizeof(num), "%u", (unsigned)(rnd(s) % 2030));
                puts_(b, num);
            }
        }
        const char *ends[] = {"。", "。", "！", "？", "。\n\n", "。\n"};
        puts_(b, ends[rnd(s) % 6]);
    }
}

static void ident(sb *b, uint64_t *s) {
    static const char *const parts[] = {"buf", "len", "count", "index", "node", "value", "result", "state", "ctx",
                                        "item", "next", "prev", "size", "data", "key", "name", "path", "err"};
    puts_(b, parts[rnd(s) % 18]);
    if (rnd(s) % 2) {
        put(b, "_", 1);
        puts_(b, parts[rnd(s) % 18]);
    }
}

static void code(sb *b, size_t target, uint64_t *s) {
    size_t end = b->n + target;
    while (b->n < end) {
        if (rnd(s) % 2) {
            puts_(b, "/* ");
            english(b, 40 + rnd(s) % 80, s);
            puts_(b, " */\nstatic int ");
            ident(b, s);
            puts_(b, "(const char *");
            ident(b, s);
            puts_(b, ", size_t n) {\n");
            for (int i = 0, m = 2 + (int)(rnd(s) % 8); i < m; i++) {
                puts_(b, "    if (");
                ident(b, s);
                const char *ops[] = {" == ", " != ", " < ", " >= "};
                puts_(b, ops[rnd(s) % 4]);
                char num[16];
                snprintf(num, sizeof(num), "%u", (unsigned)(rnd(s) % 4096));
                puts_(b, num);
                puts_(b, ") {\n        return ");
                ident(b, s);
                puts_(b, "[i] + 1;\n    }\n");
            }
            puts_(b, "    printf(\"%d items\\n\", n);\n    return 0;\n}\n\n");
        } else {
            puts_(b, "def ");
            ident(b, s);
            puts_(b, "(self, ");
            ident(b, s);
            puts_(b, "):\n    \"\"\"");
            english(b, 30 + rnd(s) % 60, s);
            puts_(b, "\"\"\"\n");
            for (int i = 0, m = 2 + (int)(rnd(s) % 6); i < m; i++) {
                puts_(b, "    for ");
                ident(b, s);
                puts_(b, " in range(len(self.");
                ident(b, s);
                puts_(b, ")):\n        self.");
                ident(b, s);
                puts_(b, ".append({'key': 42, 'value': None})\n");
            }
            puts_(b, "    return True\n\n");
        }
    }
}

char *corpus_make(corpus_kind kind, size_t n, uint64_t seed, size_t *out_len) {
    sb b = {0};
    uint64_t s = seed;
    while (b.n < n) {
        size_t doc = 4096 + rnd(&s) % 12288;
        corpus_kind k = kind;
        if (kind == CORPUS_MIXED) {
            uint64_t r = rnd(&s) % 10;
            k = r < 4 ? CORPUS_ENGLISH : r < 7 ? CORPUS_CHINESE : CORPUS_CODE;
        }
        if (k == CORPUS_ENGLISH) english(&b, doc, &s);
        else if (k == CORPUS_CHINESE) chinese(&b, doc, &s);
        else code(&b, doc, &s);
        put(&b, "\n", 1);
    }
    b.p[b.n] = '\0';
    *out_len = b.n;
    return b.p;
}
