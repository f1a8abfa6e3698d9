/* Generated text of a request's choices: appending pieces, stop strings, and
 * how much of it can be sent without splitting a stop string or a UTF-8
 * character. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

serve_request *serve_request_new(int32_t n_choices) {
    if (n_choices < 1) return NULL;
    serve_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->choices = calloc((size_t)n_choices, sizeof *r->choices);
    if (!r->choices || pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r->choices);
        free(r);
        return NULL;
    }
    if (pthread_cond_init(&r->cond, NULL) != 0) {
        pthread_mutex_destroy(&r->mu);
        free(r->choices);
        free(r);
        return NULL;
    }
    r->n_choices = n_choices;
    for (int32_t i = 0; i < n_choices; i++) r->choices[i] = (serve_choice){.req = r, .index = i, .slot = -1};
    r->max_tokens = -1;
    r->top_logprobs = -1;
    r->id_slot = -1;
    return r;
}

void serve_request_free(serve_request *r) {
    if (!r) return;
    free(r->prompt);
    tessera_mtmd_chunks_free(r->chunks);
    for (int32_t i = 0; i < r->n_media; i++) tessera_media_free(r->media[i]);
    free(r->media);
    free(r->spans);
    for (int32_t i = 0; i < r->n_choices; i++) {
        tessera_sampler_free(r->choices[i].sampler);
        free(r->choices[i].text);
        free(r->choices[i].lp);
        free(r->choices[i].toks);
    }
    free(r->choices);
    free(r->marks);
    free(r->logit_bias);
    for (int32_t i = 0; i < r->n_dry_breakers; i++) free(r->dry_breakers[i]);
    free(r->dry_breakers);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    for (int i = 0; i < r->rules.n_tool_names; i++) free(r->rules.tool_names[i]);
    free(r->rules.tool_names);
    free(r->dialect_echo);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

int32_t serve_request_n_gen(const serve_request *r) {
    int32_t n = 0;
    for (int32_t i = 0; i < r->n_choices; i++) n += r->choices[i].n_gen;
    return n;
}

int serve_text_append(serve_choice *c, const char *piece, size_t n) {
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 256;
        while (cap < c->len + n + 1) cap *= 2;
        char *t = realloc(c->text, cap);
        if (!t) return -1;
        c->text = t;
        c->cap = cap;
    }
    memcpy(c->text + c->len, piece, n);
    c->len += n;
    c->text[c->len] = '\0';
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

bool serve_text_check_stop(serve_choice *c, size_t from) {
    const serve_request *r = c->req;
    size_t cut = c->len;
    bool found = false;
    for (int i = 0; i < r->n_stop; i++) {
        size_t sl = strlen(r->stop[i]);
        if (sl == 0 || sl > c->len) continue;
        /* A match must end in the new bytes; start where it could. */
        size_t start = from >= sl ? from - sl + 1 : 0;
        for (size_t p = start; p + sl <= c->len && p < cut; p++)
            if (!memcmp(c->text + p, r->stop[i], sl)) {
                cut = p;
                found = true;
                c->stopped_by = r->stop[i];
                break;
            }
    }
    if (found) {
        c->len = cut;
        c->text[cut] = '\0';
        c->n_ready = cut;
        return true;
    }
    size_t hold = 0;
    for (int i = 0; i < r->n_stop; i++) {
        size_t h = partial_stop(c->text, c->len, r->stop[i]);
        if (h > hold) hold = h;
    }
    size_t ready = serve_utf8_complete(c->text, c->len - hold);
    if (ready > c->n_ready) c->n_ready = ready;
    return false;
}

tessera_token serve_media_token(const char *hash) {
    /* 30 bits of the content hash below -1: two media collide once in 2^30 */
    unsigned long long h = strtoull(hash ? hash : "0", NULL, 16);
    return (tessera_token)(-2 - (int32_t)(h & 0x3fffffffu));
}

int serve_request_add_media(serve_request *r, tessera_media *m) {
    tessera_media **grown = realloc(r->media, (size_t)(r->n_media + 1) * sizeof *grown);
    if (!grown) return -1;
    r->media = grown;
    r->media[r->n_media++] = m;
    return 0;
}
