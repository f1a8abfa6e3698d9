#include "golden.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The numbers of a JSON array, *n of them, as int32 (into a malloc'd
 * array of int32_t) or as float (of float). */
static void *number_array(const cJSON *a, int32_t *n, bool as_float) {
    *n = cJSON_GetArraySize(a);
    void *v = calloc((size_t)(*n > 0 ? *n : 1), 4);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (as_float) ((float *)v)[i++] = (float)e->valuedouble;
        else ((int32_t *)v)[i++] = (int32_t)e->valuedouble;
    }
    return v;
}

static int parse_case(const char *line, golden_case *c) {
    memset(c, 0, sizeof *c);
    cJSON *j = cJSON_Parse(line);
    if (!j) return -1;
    const cJSON *prompt = cJSON_GetObjectItem(j, "prompt");
    const cJSON *tokens = cJSON_GetObjectItem(j, "tokens");
    const cJSON *top = cJSON_GetObjectItem(j, "top_logits");
    const cJSON *all = cJSON_GetObjectItem(j, "all_logits");
    const cJSON *greedy = cJSON_GetObjectItem(j, "greedy");
    const cJSON *margin = cJSON_GetObjectItem(j, "greedy_margin");
    if (!cJSON_IsString(prompt) || !cJSON_IsArray(tokens) || !cJSON_IsArray(top)) {
        cJSON_Delete(j);
        return -1;
    }
    c->prompt = strdup(prompt->valuestring);
    c->special = cJSON_IsTrue(cJSON_GetObjectItem(j, "special"));
    c->tokens = number_array(tokens, &c->n_tokens, false);
    c->top = calloc((size_t)c->n_tokens * GOLDEN_TOP, sizeof *c->top);
    int p = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, top) {
        if (p >= c->n_tokens) break;
        int k = 0;
        const cJSON *pair;
        cJSON_ArrayForEach(pair, row) {
            if (k >= GOLDEN_TOP) break;
            c->top[p * GOLDEN_TOP + k].id = (int32_t)cJSON_GetArrayItem(pair, 0)->valuedouble;
            c->top[p * GOLDEN_TOP + k].logit = (float)cJSON_GetArrayItem(pair, 1)->valuedouble;
            k++;
        }
        p++;
    }
    if (cJSON_IsArray(all) && cJSON_GetArraySize(all) == c->n_tokens) {
        c->n_vocab = cJSON_GetArraySize(cJSON_GetArrayItem(all, 0));
        c->all = calloc((size_t)c->n_tokens * (size_t)c->n_vocab, sizeof *c->all);
        p = 0;
        cJSON_ArrayForEach(row, all) {
            int k = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, row) {
                if (k < c->n_vocab) c->all[(size_t)p * (size_t)c->n_vocab + (size_t)k] = (float)e->valuedouble;
                k++;
            }
            p++;
        }
    }
    if (cJSON_IsArray(greedy)) c->greedy = number_array(greedy, &c->n_greedy, false);
    if (cJSON_IsArray(margin)) c->margin = number_array(margin, &c->n_margin, true);
    cJSON_Delete(j);
    return 0;
}

int golden_load(const char *path, golden_case **out) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "golden: cannot open %s\n", path);
        return -1;
    }
    golden_case *cases = NULL;
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, fp)) > 0) {
        if (len <= 1) continue;
        golden_case *nc = realloc(cases, (size_t)(n + 1) * sizeof *nc);
        if (!nc) break;
        cases = nc;
        if (parse_case(line, &cases[n]) != 0) {
            fprintf(stderr, "golden: %s: line %d does not parse\n", path, n + 1);
            golden_free(cases, n);
            free(line);
            fclose(fp);
            return -1;
        }
        n++;
    }
    free(line);
    fclose(fp);
    *out = cases;
    return n;
}

void golden_free(golden_case *cases, int n) {
    for (int i = 0; i < n; i++) {
        free(cases[i].prompt);
        free(cases[i].tokens);
        free(cases[i].top);
        free(cases[i].all);
        free(cases[i].greedy);
        free(cases[i].margin);
    }
    free(cases);
}
