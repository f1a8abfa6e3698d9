/* Prompt lookup (spec.h): the text's last n tokens, found earlier in it,
 * and what followed them there. A plain scan from the end: the texts are a
 * context long, and a draft is asked for once per verified batch. */
#include "spec/spec.h"

int32_t spec_ngram_draft(const int32_t *toks, int32_t n_toks, int32_t n, int32_t max, int32_t *out) {
    if (n <= 0 || max <= 0 || n_toks <= n) return 0;
    const int32_t *key = toks + n_toks - n;
    for (int32_t j = n_toks - n - 1; j >= 0; j--) {
        int32_t k = 0;
        while (k < n && toks[j + k] == key[k]) k++;
        if (k < n) continue;
        int32_t m = 0;
        for (int32_t i = j + n; i < n_toks && m < max; i++) out[m++] = toks[i];
        return m;
    }
    return 0;
}
