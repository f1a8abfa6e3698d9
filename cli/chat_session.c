/* A conversation through the chat template with KV reuse (chat_session.h). */
#include "chat_session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TESSERA_HAVE_CJSON
#include <cJSON.h>
#endif

#include "cli_util.h"

/* ---------------------------------------------------------- small lists */

static int token_list_reserve(token_list *t, int32_t cap) {
    if (cap <= t->cap) return 0;
    tessera_token *p = realloc(t->ids, (size_t)cap * sizeof *p);
    if (!p) return -1;
    t->ids = p;
    t->cap = cap;
    return 0;
}

static int token_list_push(token_list *t, tessera_token id) {
    if (t->n == t->cap && token_list_reserve(t, t->cap ? t->cap * 2 : 256) < 0) return -1;
    t->ids[t->n++] = id;
    return 0;
}

/* Tokenize into t (grown as needed). 0 ok, -1 with the error printed as
 * "cmd: why". */
static int tokenize_into(const char *cmd, const tessera_model *m, const char *text, size_t len,
                         bool add_special, token_list *t) {
    for (;;) {
        int32_t n = tessera_tokenize(m, text, len, t->ids, t->cap, add_special, true);
        if (n == INT32_MIN) {
            fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
            return -1;
        }
        if (n >= 0) {
            t->n = n;
            return 0;
        }
        if (token_list_reserve(t, -n) < 0) {
            fprintf(stderr, "%s: out of memory for %d tokens\n", cmd, (int)-n);
            return -1;
        }
    }
}

/* role must be a static string ("system", "user", "assistant"). */
static int conv_insert(conversation *c, size_t at, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        tessera_chat_message *p = realloc(c->msgs, cap * sizeof *p);
        if (!p) return -1;
        c->msgs = p;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, content, len);
    copy[len] = '\0';
    memmove(&c->msgs[at + 1], &c->msgs[at], (c->n - at) * sizeof *c->msgs);
    c->msgs[at] = (tessera_chat_message){.role = role, .content = copy};
    c->n++;
    return 0;
}

static int conv_add(conversation *c, const char *role, const char *content, size_t len) {
    return conv_insert(c, c->n, role, content, len);
}

static void conv_remove(conversation *c, size_t i) {
    free((char *)c->msgs[i].content);
    memmove(&c->msgs[i], &c->msgs[i + 1], (c->n - i - 1) * sizeof *c->msgs);
    c->n--;
}

static void conv_free(conversation *c) {
    for (size_t i = 0; i < c->n; i++) free((char *)c->msgs[i].content);
    free(c->msgs);
    memset(c, 0, sizeof *c);
}

static bool has_system(const conversation *c) {
    return c->n > 0 && !strcmp(c->msgs[0].role, "system");
}

/* A growable byte string for the reply being generated. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

static int text_append(text_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) return -1;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ session */

int chat_session_open(chat_session *s, const char *cmd, const cli_params *p) {
    memset(s, 0, sizeof *s);
    s->cmd = cmd;
    s->p = p;
    int32_t n_ctx = p->n_ctx;
    if (p->mmproj && (p->model_draft || p->spec_ngram)) {
        /* a medium is ids the draft cannot decode and positions no n-gram
         * or draft model knows */
        fprintf(stderr, "%s: speculative decoding (%s) works without --mmproj\n", cmd,
                p->model_draft ? "-md" : "--spec-type");
        return -1;
    }
    s->model = cli_model_load(cmd, p, p->model, &n_ctx);
    if (!s->model) return -1;
    s->ctx = cli_context_new(cmd, p, s->model, n_ctx);
    if (!s->ctx) return -1;
    s->n_ctx = (int32_t)tessera_context_n_ctx(s->ctx);
    s->context_shift = cli_context_shift_usable(cmd, p, s->ctx);
    s->sampler = cli_sampler_new(cmd, p, s->model, s->n_ctx);
    if (!s->sampler || cli_grammar_attach(cmd, p, s->model, s->sampler) != 0) return -1;
    if (cli_chat_setup(cmd, p, s->model, 0, &s->chat) < 0) return -1;
    cli_session target = {.model = s->model, .ctx = s->ctx, .n_ctx = s->n_ctx};
    if (cli_spec_open(&s->spec, cmd, p, &target) != 0) return -1;
    if (p->verbose)
        fprintf(stderr, "[%s; template %s; context %d; seed %u]\n", tessera_model_desc(s->model),
                s->chat.source, (int)s->n_ctx, tessera_sampler_seed(s->sampler));
    if (p->system && chat_session_set_system(s, p->system) < 0) return -1;
    if (p->mmproj) {
        tessera_mtmd_params mp = tessera_mtmd_default_params();
        mp.no_offload = p->no_mmproj_offload != 0;
        mp.n_threads = p->n_threads;
        mp.explain = p->explain != 0;
        s->mm = tessera_mtmd_load(s->model, p->mmproj, &mp);
        if (!s->mm) {
            fprintf(stderr, "%s: --mmproj: %s\n", cmd, tessera_last_error());
            return -1;
        }
        for (int32_t i = 0; i < p->n_media; i++)
            if (chat_session_add_media(s, p->media[i]) < 0) return -1;
    }
    return 0;
}

static void media_drop_front(chat_session *s, int32_t n) {
    if (n > s->n_media) n = s->n_media;
    if (n <= 0) return; /* s->media may still be NULL: memmove must not see it */
    for (int32_t i = 0; i < n; i++) tessera_media_free(s->media[i]);
    if (s->n_media > n) memmove(s->media, s->media + n, (size_t)(s->n_media - n) * sizeof *s->media);
    s->n_media -= n;
}

static int32_t count_markers(const char *text) {
    int32_t n = 0;
    for (const char *p = text; (p = strstr(p, TESSERA_MEDIA_MARKER)) != NULL; p++) n++;
    return n;
}

/* Remove message i, and the media its markers stand for. */
static void conv_remove_with_media(chat_session *s, size_t i) {
    if (s->mm) {
        int32_t before = 0;
        for (size_t k = 0; k < i; k++) before += count_markers(s->conv.msgs[k].content);
        int32_t own = count_markers(s->conv.msgs[i].content);
        if (own > 0) {
            for (int32_t k = 0; k < own && before + k < s->n_media; k++) tessera_media_free(s->media[before + k]);
            int32_t end = before + own < s->n_media ? before + own : s->n_media;
            memmove(s->media + before, s->media + end, (size_t)(s->n_media - end) * sizeof *s->media);
            s->n_media -= end - before;
        }
    }
    conv_remove(&s->conv, i);
}

int chat_session_add_media(chat_session *s, const char *path) {
    if (!s->mm) {
        fprintf(stderr, "%s: an image needs --mmproj FILE (the model's multimodal projector)\n", s->cmd);
        return -1;
    }
    tessera_media *m = tessera_media_from_file(path);
    if (!m) {
        fprintf(stderr, "%s: %s\n", s->cmd, tessera_last_error());
        return -1;
    }
    if (s->n_media == s->cap_media) {
        int32_t cap = s->cap_media ? s->cap_media * 2 : 8;
        tessera_media **p = realloc(s->media, (size_t)cap * sizeof *p);
        if (!p) {
            tessera_media_free(m);
            fprintf(stderr, "%s: out of memory\n", s->cmd);
            return -1;
        }
        s->media = p;
        s->cap_media = cap;
    }
    s->media[s->n_media++] = m;
    s->n_pending++;
    return 0;
}

void chat_session_close(chat_session *s) {
    if (s->p && s->p->verbose) cli_spec_print_stats(s->cmd, &s->spec);
    cli_spec_close(&s->spec);
    tessera_mtmd_chunks_free(s->chunks);
    media_drop_front(s, s->n_media);
    free(s->media);
    tessera_mtmd_free(s->mm);
    conv_free(&s->conv);
    cli_chat_free(&s->chat);
    free(s->cached.ids);
    free(s->prompt.ids);
    tessera_sampler_free(s->sampler);
    tessera_context_free(s->ctx);
    tessera_model_free(s->model);
    memset(s, 0, sizeof *s);
}

void chat_session_clear(chat_session *s, bool keep_system) {
    while (s->conv.n > (keep_system && has_system(&s->conv) ? 1u : 0u)) conv_remove(&s->conv, s->conv.n - 1);
    media_drop_front(s, s->n_media - s->n_pending); /* the pending ones still go with the next message */
    s->cached.n = 0;
    tessera_kv_truncate(s->ctx, 0);
    tessera_sampler_reset(s->sampler);
}

int chat_session_set_system(chat_session *s, const char *text) {
    if (has_system(&s->conv)) conv_remove(&s->conv, 0);
    if (text && conv_insert(&s->conv, 0, "system", text, strlen(text)) < 0) {
        fprintf(stderr, "%s: out of memory\n", s->cmd);
        return -1;
    }
    return 0;
}

/* Render the conversation and tokenize it into s->prompt, dropping the
 * oldest turns until it leaves a quarter of the context for the reply.
 * Returns 0, 1 when even the newest message alone does not fit (it is
 * removed), -1 on error. */
/* The id standing for every position of medium m in prompt and cached:
 * negative, from its content hash. */
static tessera_token media_id(const tessera_media *m) {
    unsigned long long h = strtoull(tessera_media_hash(m), NULL, 16);
    return -(tessera_token)(1 + (h & 0x3fffffff));
}

/* The rendering through the projector: chunks (s->chunks) and their ids
 * (s->prompt), media ids standing for media rows. */
static int chunks_into(chat_session *s, const char *text, bool add_bos) {
    tessera_mtmd_chunks_free(s->chunks);
    s->chunks = tessera_mtmd_tokenize(s->mm, text, s->media, s->n_media - s->n_pending, add_bos, true);
    if (!s->chunks) {
        fprintf(stderr, "%s: %s\n", s->cmd, tessera_last_error());
        return -1;
    }
    int32_t n = tessera_mtmd_chunks_n_tokens(s->chunks);
    if (token_list_reserve(&s->prompt, n) < 0) {
        fprintf(stderr, "%s: out of memory for %d tokens\n", s->cmd, (int)n);
        return -1;
    }
    int32_t k = 0;
    for (int32_t c = 0; c < tessera_mtmd_chunks_count(s->chunks); c++) {
        int32_t nt, cn = tessera_mtmd_chunk_n_tokens(s->chunks, c);
        const tessera_token *t = tessera_mtmd_chunk_tokens(s->chunks, c, &nt);
        tessera_token id = t ? 0 : media_id(s->media[tessera_mtmd_chunk_medium(s->chunks, c)]);
        for (int32_t i = 0; i < cn; i++) s->prompt.ids[k++] = t ? t[i] : id;
    }
    s->prompt.n = k;
    return 0;
}

/* Decode s->prompt from position common through the chunks: text from
 * there on, a medium whole (common moves back to its start when it falls
 * inside one). Returns the position decoding started from, or -1. */
static int32_t decode_chunks_from(chat_session *s, int32_t common) {
    int32_t at = 0;
    for (int32_t c = 0; c < tessera_mtmd_chunks_count(s->chunks); c++) {
        int32_t cn = tessera_mtmd_chunk_n_tokens(s->chunks, c);
        if (!tessera_mtmd_chunk_tokens(s->chunks, c, NULL) && common > at && common < at + cn) common = at;
        at += cn;
    }
    tessera_kv_truncate(s->ctx, common);
    at = 0;
    for (int32_t c = 0; c < tessera_mtmd_chunks_count(s->chunks); c++) {
        int32_t nt, cn = tessera_mtmd_chunk_n_tokens(s->chunks, c);
        const tessera_token *t = tessera_mtmd_chunk_tokens(s->chunks, c, &nt);
        if (at + cn > common) {
            if (t) {
                int32_t from = common > at ? common - at : 0;
                if (tessera_decode(s->ctx, t + from, cn - from, at + from, 0) != 0) return -1;
            } else {
                const float *rows = tessera_mtmd_encode_chunk(s->mm, s->chunks, c);
                int32_t gx, gy; /* the rows' grid (M-RoPE positions) */
                if (!rows || tessera_mtmd_chunk_grid(s->mm, s->chunks, c, &gx, &gy) != 0 ||
                    tessera_decode_embd_grid(s->ctx, rows, gx, gy, at, 0, tessera_mtmd_decode_flags(s->mm)) != 0)
                    return -1;
                if (s->p->verbose)
                    fprintf(stderr, "[%s: %d positions, encoded in %.2f ms%s]\n",
                            tessera_mtmd_chunk_type(s->chunks, c) == TESSERA_CHUNK_AUDIO ? "audio" : "image", (int)cn,
                            tessera_mtmd_last_encode_ms(s->mm), tessera_mtmd_last_encode_ms(s->mm) > 0 ? "" : " (cached)");
            }
        }
        at += cn;
    }
    return common;
}

static int render_fitting(chat_session *s, int *n_dropped) {
    int32_t room = s->n_ctx / 4 > 0 ? s->n_ctx / 4 : 1;
    for (;;) {
        size_t len = 0;
        char *text = tessera_chat_template_render(s->chat.tmpl, s->conv.msgs, s->conv.n, true, &len);
        bool add_bos = text && !tessera_chat_template_text_has_bos(s->chat.tmpl, text, len);
        if (!text) {
            fprintf(stderr, "%s: %s\n", s->cmd, tessera_last_error());
            return -1;
        }
        int rc = s->mm ? chunks_into(s, text, add_bos) : tokenize_into(s->cmd, s->model, text, len, add_bos, &s->prompt);
        free(text);
        if (rc < 0) return -1;
        if (s->prompt.n <= s->n_ctx - room) return 0;
        /* Drop the oldest user turn and the reply after it; keep a system message. */
        size_t first = has_system(&s->conv) ? 1 : 0;
        if (first + 1 >= s->conv.n) {
            fprintf(stderr,
                    "%s: the message (%d tokens with the template) does not fit the context of %d tokens "
                    "(-c); it was not sent\n",
                    s->cmd, (int)s->prompt.n, (int)s->n_ctx);
            conv_remove_with_media(s, s->conv.n - 1);
            return 1;
        }
        conv_remove_with_media(s, first);
        if (first < s->conv.n - 1 && !strcmp(s->conv.msgs[first].role, "assistant"))
            conv_remove_with_media(s, first);
        (*n_dropped)++;
    }
}

/* Decode the part of s->prompt that differs from what the cache holds.
 * 0 ok, 1 interrupted, -1 error. */
static int decode_prompt(chat_session *s, chat_turn_info *info) {
    int32_t common = 0;
    while (common < s->cached.n && common < s->prompt.n && s->cached.ids[common] == s->prompt.ids[common])
        common++;
    if (s->prompt.n == 0) {
        fprintf(stderr, "%s: the template rendered no tokens\n", s->cmd);
        return -1;
    }
    /* Decode at least one token so there are logits to sample from. */
    if (common == s->prompt.n) common--;
    /* A sliding-window cache may not go back to common: it then starts over. */
    tessera_kv_truncate(s->ctx, common);
    if (tessera_kv_len(s->ctx) < common) common = tessera_kv_len(s->ctx);
    int32_t n_new = s->prompt.n - common;
    info->n_prompt = s->prompt.n;
    info->n_reused = common;
    if (s->p->verbose)
        fprintf(stderr, "[prompt: %d tokens, %d reused from the cache, %d decoded]\n", (int)s->prompt.n,
                (int)common, (int)n_new);
    double t0 = now_ms();
    int rc;
    if (s->chunks) {
        int32_t from = decode_chunks_from(s, common);
        rc = from < 0 ? -1 : 0;
        if (from >= 0) common = from;
    } else {
        rc = tessera_decode(s->ctx, s->prompt.ids + common, n_new, common, 0);
        /* the draft model reads the turn too, timed with it as llama.cpp does */
        if (rc == 0 && s->spec.spec) rc = tessera_spec_prefill(s->spec.spec, 0, s->prompt.ids, s->prompt.n);
    }
    info->prompt_ms = now_ms() - t0;
    if (rc < 0) {
        /* The cache keeps what it held before the call, up to common. */
        s->cached.n = common < s->cached.n ? common : s->cached.n;
        tessera_kv_truncate(s->ctx, s->cached.n);
        if (tessera_aborted()) return 1;
        fprintf(stderr, "%s: %s\n", s->cmd, tessera_last_error());
        return -1;
    }
    if (token_list_reserve(&s->cached, s->prompt.n) < 0) {
        fprintf(stderr, "%s: out of memory\n", s->cmd);
        return -1;
    }
    memcpy(s->cached.ids, s->prompt.ids, (size_t)s->prompt.n * sizeof *s->prompt.ids);
    s->cached.n = s->prompt.n;
    for (int32_t i = common; i < s->prompt.n; i++)
        if (s->prompt.ids[i] >= 0) tessera_sampler_accept(s->sampler, s->prompt.ids[i]);
    /* Each reply is one match of --grammar / --json-schema. */
    if (tessera_sampler_grammar_restart(s->sampler) != 0) {
        fprintf(stderr, "%s: %s\n", s->cmd, tessera_last_error());
        return -1;
    }
    return 0;
}

/* --context-shift with a full context: drop half of what follows the first
 * --keep tokens (-1: the turn's whole prompt) from the cache, and from
 * s->cached, which mirrors it. The next turn's rendering then matches the
 * cache only up to the kept tokens and decodes the rest again. */
static int shift_context(chat_session *s, const chat_turn_info *info) {
    const bool has_bos = s->cached.n > 0 && s->cached.ids[0] == tessera_token_bos(s->model);
    const int32_t keep = tessera_shift_keep(s->p->n_keep, info->n_prompt, has_bos);
    return cli_context_shift(s->cmd, s->ctx, 0, keep, s->cached.ids, &s->cached.n, s->p->verbose);
}

/* Sample, emit and decode the reply token by token into reply. 0 ok (the
 * reason in info->end), -1 error. */
static int generate_reply(chat_session *s, text_buf *reply, chat_piece_fn on_piece, void *user,
                          chat_turn_info *info) {
    char piece[256];
    const int32_t limit = s->p->n_predict;
    double t0 = now_ms();
    tessera_token q[64];
    int32_t nq = 0, qi = 0;
    info->end = CHAT_END_LIMIT;
    for (;;) {
        if (tessera_aborted()) {
            info->end = CHAT_END_INTERRUPTED;
            break;
        }
        if (limit >= 0 && info->n_gen >= limit) break;
        if (s->cached.n >= s->n_ctx && !s->context_shift) {
            info->end = CHAT_END_FULL;
            break;
        }
        if (s->cached.n >= s->n_ctx && shift_context(s, info) != 0) return -1;
        tessera_token tok;
        if (qi < nq) {
            tok = q[qi++]; /* a speculative step's, accepted already */
        } else {
            const float *logits = tessera_logits(s->ctx, -1);
            if (!logits) {
                fprintf(stderr, "%s: %s\n", s->cmd, tessera_last_error());
                return -1;
            }
            tok = tessera_sampler_sample(s->sampler, logits);
            if (tok < 0) {
                fprintf(stderr, "%s: sampling failed: %s\n", s->cmd, tessera_last_error());
                return -1;
            }
            tessera_sampler_accept(s->sampler, tok);
        }
        if (tessera_token_is_eog(s->model, tok)) {
            info->end = CHAT_END_EOG;
            break;
        }
        info->n_gen++;
        int32_t len = tessera_token_to_piece(s->model, tok, piece, sizeof piece, false);
        if (len > 0) {
            on_piece(piece, (size_t)len, user);
            if (text_append(reply, piece, (size_t)len) < 0) {
                fprintf(stderr, "%s: out of memory\n", s->cmd);
                return -1;
            }
        }
        /* The last token of a limited reply needs no decode: nothing samples after it. */
        if (limit >= 0 && info->n_gen >= limit) break;
        if (token_list_push(&s->cached, tok) < 0) {
            fprintf(stderr, "%s: out of memory\n", s->cmd);
            return -1;
        }
        if (qi < nq) continue; /* a step's token before its last: in the cache already */
        if (s->spec.spec) {
            /* The cache holds all of cached but tok; the step decodes it with a draft. */
            int32_t max = limit >= 0 ? limit - info->n_gen : 64;
            nq = tessera_spec_step(s->spec.spec, 0, s->sampler, s->cached.ids, s->cached.n, q, max < 64 ? max : 64,
                                   NULL);
            qi = 0;
            if (nq > 0) continue;
            nq = 0;
        } else if (tessera_decode(s->ctx, &tok, 1, s->cached.n - 1, 0) == 0) {
            continue;
        }
        s->cached.n--; /* tok did not get into the cache */
        if (tessera_aborted()) {
            info->end = CHAT_END_INTERRUPTED;
            break;
        }
        fprintf(stderr, "\n%s: %s\n", s->cmd, tessera_last_error());
        return -1;
    }
    info->gen_ms = now_ms() - t0;
    return 0;
}

int chat_session_turn(chat_session *s, const char *text, chat_piece_fn on_piece, void *user,
                      chat_turn_info *info) {
    memset(info, 0, sizeof *info);
    char *with_media = NULL;
    if (s->n_pending > 0) { /* the attached media go before the text */
        size_t ml = strlen(TESSERA_MEDIA_MARKER), tl = strlen(text);
        with_media = malloc((size_t)s->n_pending * ml + tl + 1);
        if (!with_media) {
            fprintf(stderr, "%s: out of memory\n", s->cmd);
            return -1;
        }
        for (int32_t i = 0; i < s->n_pending; i++) memcpy(with_media + (size_t)i * ml, TESSERA_MEDIA_MARKER, ml);
        memcpy(with_media + (size_t)s->n_pending * ml, text, tl + 1);
        text = with_media;
        s->n_pending = 0;
    } else if (s->mm && count_markers(text) > 0) {
        fprintf(stderr, "%s: the message names %d media (%s) but none is attached: use /image PATH first\n",
                s->cmd, (int)count_markers(text), TESSERA_MEDIA_MARKER);
        info->end = CHAT_END_NOT_SENT;
        return 0;
    }
    int added = conv_add(&s->conv, "user", text, strlen(text));
    free(with_media);
    if (added < 0) {
        fprintf(stderr, "%s: out of memory\n", s->cmd);
        return -1;
    }
    int rc = render_fitting(s, &info->n_dropped);
    if (rc != 0) {
        info->end = CHAT_END_NOT_SENT;
        return rc < 0 ? -1 : 0;
    }
    rc = decode_prompt(s, info);
    if (rc < 0) return -1;
    text_buf reply = {0};
    if (rc > 0) info->end = CHAT_END_INTERRUPTED;
    else if (generate_reply(s, &reply, on_piece, user, info) < 0) rc = -1;
    /* The template takes valid UTF-8 only: a reply cut inside a character
     * (or a model's stray byte token) is kept with U+FFFD in its place. */
    size_t clean_len = 0;
    char *clean = rc >= 0 ? cli_utf8_clean(reply.data ? reply.data : "", reply.len, &clean_len) : NULL;
    if (rc >= 0 && (!clean || conv_add(&s->conv, "assistant", clean, clean_len) < 0)) {
        fprintf(stderr, "%s: out of memory\n", s->cmd);
        rc = -1;
    }
    free(clean);
    free(reply.data);
    return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ save/load */

#ifdef TESSERA_HAVE_CJSON
int chat_session_save(chat_session *s, const char *path) {
    cJSON *root = cJSON_CreateObject();
    cJSON *msgs = root ? cJSON_AddArrayToObject(root, "messages") : NULL;
    char *text = NULL;
    int rc = -1;
    if (!msgs) goto oom;
    for (size_t i = 0; i < s->conv.n; i++) {
        cJSON *m = cJSON_CreateObject();
        if (!m) goto oom;
        cJSON_AddItemToArray(msgs, m);
        if (!cJSON_AddStringToObject(m, "role", s->conv.msgs[i].role) ||
            !cJSON_AddStringToObject(m, "content", s->conv.msgs[i].content))
            goto oom;
    }
    text = cJSON_Print(root);
    if (!text) goto oom;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write '%s': %s\n", s->cmd, path, strerror(errno));
        goto done;
    }
    int bad = fputs(text, f) < 0 || fputc('\n', f) < 0;
    bad |= fclose(f) != 0;
    if (bad) fprintf(stderr, "%s: error writing '%s'\n", s->cmd, path);
    else rc = 0;
    goto done;
oom:
    fprintf(stderr, "%s: out of memory saving '%s'\n", s->cmd, path);
done:
    free(text);
    cJSON_Delete(root);
    return rc;
}

/* The static role string for a role name, or NULL. */
static const char *known_role(const char *r) {
    static const char *const roles[] = {"system", "user", "assistant"};
    for (size_t i = 0; i < 3; i++)
        if (!strcmp(r, roles[i])) return roles[i];
    return NULL;
}

int chat_session_load(chat_session *s, const char *path) {
    size_t len = 0;
    char *text = cli_read_file(s->cmd, NULL, path, &len);
    if (!text) return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    conversation conv = {0};
    int rc = -1;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!root || !cJSON_IsArray(msgs)) {
        fprintf(stderr, "%s: '%s' is not a conversation: expected {\"messages\": [...]}\n", s->cmd, path);
        goto done;
    }
    int i = 0;
    for (const cJSON *m = msgs->child; m; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        const char *r = cJSON_IsString(role) ? known_role(role->valuestring) : NULL;
        if (!r || !cJSON_IsString(content) || (!strcmp(r, "system") && i > 0)) {
            fprintf(stderr,
                    "%s: '%s': messages[%d] needs a \"role\" (system first, user, assistant) and a string "
                    "\"content\"\n",
                    s->cmd, path, i);
            goto done;
        }
        if (conv_add(&conv, r, content->valuestring, strlen(content->valuestring)) < 0) {
            fprintf(stderr, "%s: out of memory loading '%s'\n", s->cmd, path);
            goto done;
        }
    }
    conv_free(&s->conv);
    s->conv = conv;
    memset(&conv, 0, sizeof conv);
    rc = 0;
done:
    conv_free(&conv);
    cJSON_Delete(root);
    return rc;
}
#else
int chat_session_save(chat_session *s, const char *path) {
    fprintf(stderr, "%s: cannot save '%s': this build has no JSON support (libcjson)\n", s->cmd, path);
    return -1;
}

int chat_session_load(chat_session *s, const char *path) {
    fprintf(stderr, "%s: cannot load '%s': this build has no JSON support (libcjson)\n", s->cmd, path);
    return -1;
}
#endif
