/* golden — llama.cpp's reference outputs in ../shared/golden/<model>.jsonl. */
#ifndef TESSERA_TEST_GOLDEN_H
#define TESSERA_TEST_GOLDEN_H

#include <stdint.h>

enum { GOLDEN_TOP = 8 };

typedef struct golden_top {
    int32_t id;
    float logit;
} golden_top;

typedef struct golden_case {
    char *prompt;
    int special;     /* tokenized with special tokens parsed */
    int32_t *tokens; /* with BOS */
    int32_t n_tokens;
    golden_top *top;   /* [n_tokens][GOLDEN_TOP] */
    float *all;        /* [n_tokens][n_vocab] or NULL */
    int32_t n_vocab;   /* of all, 0 if absent */
    int32_t *greedy;
    int32_t n_greedy;
    float *margin;     /* greedy_margin */
    int32_t n_margin;
} golden_case;

/* Read every line of path. Returns the count (>= 0) or -1 with a message on
 * stderr. */
int golden_load(const char *path, golden_case **out);
void golden_free(golden_case *cases, int n);

#endif
