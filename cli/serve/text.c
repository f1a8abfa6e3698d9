/* Generated text of a request: appending pieces, stop strings, and how much
 * of it can be sent without splitting a stop string or a UTF-8 character. */
#include <stdlib.h>
#include <string.h>

#include "serve.h"

serve_request *serve_request_new(void) {
    serve_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    if (pthread_cond_init(&r->cond, NULL) != 0) {
        free(r);
        return NULL;
    }
    r->max_tokens = -1;
    return r;
}

void serve_request_free(serve_request *r) {
    if (!r) return;
    free(r->prompt);
    tessera_sampler_free(r->sampler);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->text);
    pthread_cond_destroy(&r->cond);
    free(r);
}

int serve_text_append(serve_request *r, const char *piece, size_t n) {
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->len + n + 1) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) return -1;
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, piece, n);
    r->len += n;
    r->text[r->len] = '\0';
    return 0;
}

size_t serve_utf8_complete(const char *s, size_t n) {
    /* Look back over at most 3 continuation bytes for a lead byte. */
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0) return n;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (need == 1) return n;         /* ASCII (or stray bytes): nothing pending */
    return back + 1 < need ? i - 1 : n;
}

/* Bytes at the end of text that are a proper prefix of stop. */
static size_t partial_stop(const char *text, size_t len, const char *stop) {
    size_t sl = strlen(stop);
    if (sl == 0) return 0;
    for (size_t k = sl > len ? len : sl - 1; k > 0; k--)
        if (!memcmp(text + len - k, stop, k)) return k;
    return 0;
}

bool serve_text_check_stop(serve_request *r, size_t from) {
    size_t cut = r->len;
    bool found = false;
    for (int i = 0; i < r->n_stop; i++) {
        size_t sl = strlen(r->stop[i]);
        if (sl == 0 || sl > r->len) continue;
        /* A match must end in the new bytes; start where it could. */
        size_t start = from >= sl ? from - sl + 1 : 0;
        for (size_t p = start; p + sl <= r->len && p < cut; p++)
            if (!memcmp(r->text + p, r->stop[i], sl)) {
                cut = p;
                found = true;
                break;
            }
    }
    if (found) {
        r->len = cut;
        r->text[cut] = '\0';
        r->n_ready = cut;
        return true;
    }
    size_t hold = 0;
    for (int i = 0; i < r->n_stop; i++) {
        size_t h = partial_stop(r->text, r->len, r->stop[i]);
        if (h > hold) hold = h;
    }
    size_t ready = serve_utf8_complete(r->text, r->len - hold);
    if (ready > r->n_ready) r->n_ready = ready;
    return false;
}
